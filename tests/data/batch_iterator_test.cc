// Tests data/batch_iterator.h: epoch orders, batching, resume, gather.
#include "data/batch_iterator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace data {
namespace {

using Indices = std::vector<int64_t>;

Indices Iota(int64_t n) {
  Indices v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// All batches from the iterator's position to the end.
std::vector<Indices> Drain(BatchIterator& it) {
  std::vector<Indices> batches;
  Indices batch;
  while (it.Next(batch)) batches.push_back(batch);
  return batches;
}

TEST(EpochOrderTest, ShuffledOrderIsAPermutation) {
  Indices order = EpochOrder(1000, /*seed=*/7, /*epoch=*/3, true);
  EXPECT_NE(order, Iota(1000));
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, Iota(1000));
}

TEST(EpochOrderTest, SameSeedAndEpochGiveSameOrder) {
  EXPECT_EQ(EpochOrder(500, 7, 2, true), EpochOrder(500, 7, 2, true));
}

TEST(EpochOrderTest, EpochsAndSeedsDiffer) {
  EXPECT_NE(EpochOrder(500, 7, 0, true), EpochOrder(500, 7, 1, true));
  EXPECT_NE(EpochOrder(500, 7, 0, true), EpochOrder(500, 8, 0, true));
}

TEST(EpochOrderTest, NoShuffleIsIdentity) {
  EXPECT_EQ(EpochOrder(10, 7, 5, false), Iota(10));
  EXPECT_TRUE(EpochOrder(0, 7, 0, true).empty());
  EXPECT_THROW(EpochOrder(-1, 7, 0, true), Error);
}

TEST(BatchIteratorTest, KeepsLastPartialBatch) {
  BatchIterator it(Iota(10), 4);
  EXPECT_EQ(it.num_batches(), 3);
  EXPECT_EQ(Drain(it),
            (std::vector<Indices>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_TRUE(it.done());
  EXPECT_EQ(it.position(), 3);
  Indices batch = {42};
  EXPECT_FALSE(it.Next(batch));
  EXPECT_TRUE(batch.empty());
}

TEST(BatchIteratorTest, DropLast) {
  BatchIterator it(Iota(10), 4, /*drop_last=*/true);
  EXPECT_EQ(it.num_batches(), 2);
  EXPECT_EQ(Drain(it), (std::vector<Indices>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // An exact multiple loses nothing either way.
  EXPECT_EQ(BatchIterator(Iota(8), 4, true).num_batches(), 2);
  EXPECT_EQ(BatchIterator(Iota(8), 4, false).num_batches(), 2);
}

TEST(BatchIteratorTest, FollowsTheGivenOrder) {
  const Indices order = EpochOrder(7, 1, 0, true);
  BatchIterator it(order, 3);
  Indices all;
  for (const Indices& b : Drain(it)) all.insert(all.end(), b.begin(), b.end());
  EXPECT_EQ(all, order);
}

TEST(BatchIteratorTest, ResumeFromPosition) {
  // A run stopped after 2 batches records position 2; a fresh iterator for
  // the same (seed, epoch), seeked there, yields exactly the remaining ones.
  BatchIterator first(EpochOrder(23, 5, 4, true), 5);
  Indices batch;
  ASSERT_TRUE(first.Next(batch));
  ASSERT_TRUE(first.Next(batch));
  const int64_t position = first.position();
  EXPECT_EQ(position, 2);
  const std::vector<Indices> rest = Drain(first);

  BatchIterator resumed(EpochOrder(23, 5, 4, true), 5);
  resumed.Seek(position);
  EXPECT_EQ(Drain(resumed), rest);

  resumed.Seek(resumed.num_batches());  // resuming at the end is allowed
  EXPECT_TRUE(resumed.done());
  EXPECT_THROW(resumed.Seek(resumed.num_batches() + 1), Error);
  EXPECT_THROW(resumed.Seek(-1), Error);
  EXPECT_THROW(BatchIterator(Iota(3), 0), Error);
}

class GatherRowsTest : public testing::DeviceTest {};

TEST_P(GatherRowsTest, GathersRowsAndLabels) {
  const Tensor images =
      Tensor::FromVector({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  const Tensor labels = Tensor::FromVector({5, 6, 7, 8}, {4});
  const Indices indices = {3, 0, 3};
  Tensor x = Tensor::Empty({3, 2}, device());
  Tensor y = Tensor::Empty({3}, device());
  GatherRows(images, indices, x);
  GatherRows(labels, indices, y);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{30, 31, 0, 1, 30, 31}));
  EXPECT_EQ(y.ToVector(), (std::vector<float>{8, 5, 8}));
}

TEST_P(GatherRowsTest, PartialBatchIntoSliceOfBuffer) {
  const Tensor images = Tensor::FromVector({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor buffer = Tensor::Zeros({4, 2}, device());
  Tensor view = buffer.Slice(0, 2);
  GatherRows(images, {2, 1}, view);
  EXPECT_EQ(buffer.ToVector(),
            (std::vector<float>{20, 21, 10, 11, 0, 0, 0, 0}));
}

TEST_P(GatherRowsTest, RejectsBadShapesAndIndices) {
  const Tensor images = Tensor::Zeros({3, 2});
  Tensor wrong_rows = Tensor::Empty({2, 2}, device());
  EXPECT_THROW(GatherRows(images, {0}, wrong_rows), Error);
  Tensor wrong_width = Tensor::Empty({1, 3}, device());
  EXPECT_THROW(GatherRows(images, {0}, wrong_width), Error);
  Tensor out = Tensor::Empty({1, 2}, device());
  EXPECT_THROW(GatherRows(images, {3}, out), Error);
  EXPECT_THROW(GatherRows(images, {-1}, out), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(GatherRowsTest);

}  // namespace
}  // namespace data
}  // namespace tandem
