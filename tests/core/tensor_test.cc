#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class TensorTest : public DeviceTest {};

TEST_P(TensorTest, FromVectorRoundTrip) {
  Tensor t = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3}, device());
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(-1), 3);
  EXPECT_EQ(t.device(), device());
  EXPECT_EQ(t.ToVector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_P(TensorTest, CopyIsSharedCloneIsDeep) {
  Tensor a = Tensor::FromVector({1, 2, 3}, {3}, device());
  Tensor shared = a;
  Tensor deep = a.Clone();
  a.CopyFrom(Tensor::FromVector({7, 8, 9}, {3}));
  EXPECT_EQ(shared.ToVector(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(deep.ToVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(shared.SharesStorageWith(a));
  EXPECT_FALSE(deep.SharesStorageWith(a));
}

TEST_P(TensorTest, SliceIsARowView) {
  Tensor t = Tensor::FromVector({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}, device());
  Tensor rows = t.Slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.ToVector(), (std::vector<float>{2, 3, 4, 5}));
  rows.CopyFrom(Tensor::FromVector({-1, -2, -3, -4}, {2, 2}));
  EXPECT_EQ(t.ToVector(), (std::vector<float>{0, 1, -1, -2, -3, -4, 6, 7}));
  EXPECT_EQ(t.Slice(4, 4).numel(), 0);
}

TEST_P(TensorTest, ReshapeSharesStorage) {
  Tensor t = Tensor::Full({2, 3}, 2.f, device());
  Tensor flat = t.Flatten();
  EXPECT_EQ(flat.shape(), (Shape{6}));
  EXPECT_TRUE(flat.SharesStorageWith(t));
  EXPECT_THROW(t.Reshape({4}), Error);
}

// Wrapped memory is released once, by the last tensor that views it.
TEST_P(TensorTest, WrapReleasesOnceWhenTheLastViewDies) {
  Tensor backing = Tensor::Full({6}, 2.f, device());  // memory to lend
  int released = 0;
  {
    Tensor wrapped = Tensor::Wrap(backing.data(), {2, 3}, device(), [&] { ++released; });
    EXPECT_EQ(wrapped.data(), backing.data());
    EXPECT_EQ(wrapped.device(), device());
    EXPECT_EQ(wrapped.ToVector(), std::vector<float>(6, 2.f));
    Tensor row = wrapped.Slice(1, 2);
    wrapped = Tensor();
    EXPECT_EQ(released, 0);  // the row still views it
    row.CopyFrom(Tensor::FromVector({7, 8, 9}, {1, 3}));
    EXPECT_EQ(backing.ToVector(), (std::vector<float>{2, 2, 2, 7, 8, 9}));
  }
  EXPECT_EQ(released, 1);
  EXPECT_THROW(Tensor::Wrap(backing.data(), {-1}, device(), [] {}), Error);
  EXPECT_THROW(Tensor::Wrap(backing.data(), {6}, device(), nullptr), Error);
}

TEST_P(TensorTest, ZerosAndItem) {
  Tensor z = Tensor::Zeros({5}, device());
  EXPECT_EQ(z.ToVector(), std::vector<float>(5, 0.f));
  EXPECT_FLOAT_EQ(Tensor::Full({1}, 3.5f, device()).Item(), 3.5f);
  EXPECT_THROW(z.Item(), Error);
}

TEST_P(TensorTest, ToMovesBetweenDevices) {
  Tensor host = Tensor::FromVector({1, 2, 3}, {3});
  Tensor there = host.To(device());
  EXPECT_EQ(there.device(), device());
  EXPECT_EQ(there.To(Device::Cpu()).ToVector(), (std::vector<float>{1, 2, 3}));
}

TEST_P(TensorTest, ErrorsNameTheShapes) {
  Tensor t = Tensor::Zeros({2, 3}, device());
  try {
    t.Slice(1, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Slice [1, 5) out of range for [2, 3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tensor::FromVector({1, 2}, {3}, device()), Error);
  EXPECT_THROW(t.CopyFrom(Tensor::Zeros({5})), Error);
  EXPECT_THROW(Tensor().data(), Error);
}

TEST_P(TensorTest, OverflowingShapeIsAnError) {
  EXPECT_THROW(Tensor::Empty({int64_t{1} << 40, int64_t{1} << 40}, device()), Error);
  EXPECT_THROW(Tensor::Zeros({4, -1}, device()), Error);
}

TEST_P(TensorTest, EmptyTensorsWork) {
  Tensor t = Tensor::Zeros({0, 4}, device());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.ToVector().empty());
  EXPECT_EQ(t.Clone().shape(), (Shape{0, 4}));
}

// Note [Tensor versions]: writes count, reads do not, views share the count.
TEST_P(TensorTest, VersionCountsWritesSharedByViews) {
  Tensor t = Tensor::FromVector({0, 1, 2, 3, 4, 5}, {3, 2}, device());
  EXPECT_EQ(t.version(), 0u);
  EXPECT_EQ(Tensor().version(), 0u);
  Tensor row = t.Slice(1, 2);
  Tensor flat = t.Flatten();
  Tensor shared = t;

  // Reads leave it alone.
  (void)t.ToVector();
  (void)t.ptr();
  (void)t.data();
  (void)t.raw_data();
  Tensor copy = t.Clone();
  EXPECT_EQ(t.version(), 0u);
  EXPECT_EQ(copy.version(), 1u);  // written by its CopyFrom, a storage of its own

  // A write through a view is a write of the storage: every view sees it.
  row.CopyFrom(Tensor::FromVector({9, 9}, {1, 2}));
  EXPECT_EQ(t.version(), 1u);
  EXPECT_EQ(row.version(), 1u);
  EXPECT_EQ(flat.version(), 1u);
  EXPECT_EQ(shared.version(), 1u);
  (void)t.mutable_ptr();
  (void)flat.mutable_data();
  EXPECT_EQ(row.version(), 3u);
  // The source of a copy is read, not written.
  Tensor other = Tensor::Zeros({6}, device());
  other.CopyFrom(t);
  EXPECT_EQ(t.version(), 3u);
  EXPECT_EQ(other.version(), 1u);
  EXPECT_EQ(copy.version(), 1u);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(TensorTest);

}  // namespace
}  // namespace tandem
