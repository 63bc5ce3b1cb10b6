// Loads the real Fashion-MNIST from Debian's dataset-fashion-mnist package
// (data/idx_reader.h) and checks its published sizes and statistics.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "data/idx_reader.h"
#include "data/normalize.h"

namespace tandem {
namespace data {
namespace {

class FashionMnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat info;
    if (::stat(kDefaultFashionMnistDir, &info) != 0) {
      GTEST_SKIP() << "skipping: " << kDefaultFashionMnistDir
                   << " is absent; install it with `sudo apt-get install "
                      "dataset-fashion-mnist`";
    }
  }
};

void ExpectValid(const TensorDataset& dataset, int64_t count) {
  ASSERT_EQ(dataset.features.shape(), (Shape{count, 28 * 28}));
  ASSERT_EQ(dataset.labels.shape(), (Shape{count}));
  EXPECT_EQ(dataset.num_classes(), 10);
  // Fashion-MNIST is balanced: count / 10 examples of every class.
  std::vector<int64_t> per_class(10, 0);
  for (float label : dataset.labels.ToVector()) {
    ASSERT_GE(label, 0.f);
    ASSERT_LE(label, 9.f);
    ++per_class[static_cast<int>(label)];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], count / 10) << c;
}

TEST_F(FashionMnistTest, TrainSplit) {
  const TensorDataset train = LoadFashionMnist(kDefaultFashionMnistDir, true);
  ExpectValid(train, 60000);
  // The commonly quoted statistics of the training pixels.
  const Normalization norm = ComputeNormalization(train.features);
  EXPECT_NEAR(norm.mean, 0.2860, 1e-3);
  EXPECT_NEAR(norm.stddev, 0.3530, 1e-3);
}

TEST_F(FashionMnistTest, TestSplit) {
  ExpectValid(LoadFashionMnist(kDefaultFashionMnistDir, false), 10000);
}

TEST_F(FashionMnistTest, MaxExamples) {
  const TensorDataset small = LoadFashionMnist(kDefaultFashionMnistDir, false, 100);
  EXPECT_EQ(small.features.shape(), (Shape{100, 784}));
}

}  // namespace
}  // namespace data
}  // namespace tandem
