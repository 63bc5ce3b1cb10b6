// Tests data/dataset.h: TensorDataset's checks and Gather.
#include "data/dataset.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace data {
namespace {

using ::tandem::testing::ErrorText;

void ExpectContainsText(const std::string& text, const std::string& needle) {
  EXPECT_NE(text.find(needle), std::string::npos)
      << "error text lacks \"" << needle << "\": " << text;
}

// The example of a Dataset of your own in docs/datasets.md: examples
// computed from their index, so nothing is held in memory.
class XorDataset : public Dataset {
 public:
  explicit XorDataset(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  int64_t feature_size() const override { return 2; }
  int64_t num_classes() const override { return 2; }
  std::string name() const override { return "xor"; }
  void Gather(const std::vector<int64_t>& indices, Tensor& features,
              Tensor& labels) const override {
    CheckGatherOutputs(*this, indices.size(), features, labels);
    float* x = features.mutable_data();
    float* y = labels.mutable_data();
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t k = indices[i];
      TANDEM_CHECK(k >= 0 && k < size_) << name() << ": no example " << k;
      const int a = k & 1, b = (k >> 1) & 1;  // example k: bits 0 and 1 of k
      x[2 * i] = a;
      x[2 * i + 1] = b;
      y[i] = a ^ b;
    }
  }

 private:
  int64_t size_;
};

TEST(DatasetTest, ADatasetOfYourOwn) {
  const XorDataset xor_data(8);
  const Dataset& d = xor_data;
  Tensor x = Tensor::Empty({4, 2}), y = Tensor::Empty({4});
  d.Gather({1, 2, 3, 4}, x, y);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1, 1, 0, 0}));
  ExpectContainsText(ErrorText([&] { d.Gather({8}, x, y); }), "xor: no example 8");
  ExpectContainsText(ErrorText([&] { d.Gather({0}, y, y); }), "xor: Gather: features is [4]");
}

// 4 examples of 3 features: x[i, j] = 10 i + j; labels 3 - i.
TensorDataset Small() {
  return TensorDataset(
      Tensor::FromVector({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3}),
      Tensor::FromVector({3, 2, 1, 0}, {4}), 4, "small.bin");
}

void ExpectContains(const std::string& text, const std::vector<std::string>& needles) {
  EXPECT_FALSE(text.empty()) << "expected an error";
  for (const std::string& needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos)
        << "error text lacks \"" << needle << "\": " << text;
  }
}

TEST(TensorDatasetTest, Sizes) {
  const TensorDataset d = Small();
  EXPECT_EQ(d.size(), 4);
  EXPECT_EQ(d.feature_size(), 3);
  EXPECT_EQ(d.num_classes(), 4);
  EXPECT_EQ(d.name(), "small.bin");
  const Dataset& base = d;
  EXPECT_EQ(base.size(), 4);
}

TEST(TensorDatasetTest, GatherWritesOnlyTheFirstRows) {
  const TensorDataset d = Small();
  Tensor x = Tensor::Full({3, 3}, -1.f), y = Tensor::Full({3}, -1.f);
  d.Gather({2, 0}, x, y);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{20, 21, 22, 0, 1, 2, -1, -1, -1}));
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1, 3, -1}));
}

TEST(TensorDatasetTest, GatherOutOfRangeWritesNothing) {
  const TensorDataset d = Small();
  Tensor x = Tensor::Full({2, 3}, -1.f), y = Tensor::Full({2}, -1.f);
  ExpectContains(ErrorText([&] { d.Gather({1, 4}, x, y); }),
                 {"small.bin", "indices[1] is 4", "expected 0 to 3"});
  ExpectContains(ErrorText([&] { d.Gather({-1}, x, y); }), {"small.bin", "indices[0] is -1"});
  EXPECT_EQ(x.ToVector(), std::vector<float>(6, -1.f));
}

TEST(TensorDatasetTest, GatherChecksOutputs) {
  const TensorDataset d = Small();
  Tensor y = Tensor::Empty({2});
  Tensor narrow = Tensor::Empty({2, 2});
  ExpectContains(ErrorText([&] { d.Gather({0}, narrow, y); }),
                 {"small.bin", "features is [2, 2]", "3 features"});
  Tensor x = Tensor::Empty({2, 3});
  ExpectContains(ErrorText([&] { d.Gather({0, 1, 2}, x, y); }),
                 {"small.bin", "3 indices", "at least 3 rows"});
  Tensor flat = Tensor::Empty({6});
  ExpectContains(ErrorText([&] { d.Gather({0}, flat, y); }), {"small.bin", "features is [6]"});
  Tensor bf16 = Tensor::Empty({2, 3}, Device::Cpu(), DType::kBFloat16);
  ExpectContains(ErrorText([&] { d.Gather({0}, bf16, y); }), {"small.bin", "bfloat16"});
  Tensor none;
  ExpectContains(ErrorText([&] { d.Gather({0}, x, none); }), {"small.bin", "labels is undefined"});
}

TEST(TensorDatasetTest, ConstructorChecks) {
  const Tensor x = Tensor::Zeros({2, 3});
  ExpectContains(ErrorText([&] { TensorDataset(x, Tensor::Zeros({3}), 2, "a.npy"); }),
                 {"a.npy", "2 feature rows", "3 labels"});
  ExpectContains(ErrorText([&] { TensorDataset(x, Tensor::FromVector({0, 2}, {2}), 2, "b.npy"); }),
                 {"b.npy", "label 2 at index 1", "0 to 1"});
  ExpectContains(ErrorText([&] { TensorDataset(x, Tensor::FromVector({0.5f, 1}, {2}), 2, "c"); }),
                 {"c: label 0.5 at index 0", "whole number"});
  ExpectContains(ErrorText([&] { TensorDataset(x, Tensor::Zeros({2}), -1, "d"); }),
                 {"d: num_classes is -1", "or 0 (real-valued labels)"});
  // 0 classes: real-valued labels, any values.
  EXPECT_EQ(TensorDataset(x, Tensor::FromVector({0.5f, -3.f}, {2}), 0, "f").num_classes(), 0);
  ExpectContains(ErrorText([&] { TensorDataset(Tensor::Zeros({6}), Tensor::Zeros({2}), 2, "e"); }),
                 {"e: features is [6]", "[N, F]"});
}

}  // namespace
}  // namespace data
}  // namespace tandem
