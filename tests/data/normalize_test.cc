// Tests data/normalize.h with hand-computed statistics.
#include "data/normalize.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace tandem {
namespace data {
namespace {

constexpr float kTolerance = 1e-6f;  // float32, values of order 1

TEST(NormalizeTest, ComputesGlobalMeanAndPopulationStddev) {
  // Mean 5; squared deviations 9+1+1+9 = 20 over 4 elements: stddev sqrt(5).
  const Tensor x = Tensor::FromVector({2, 4, 6, 8}, {2, 2});
  const Normalization norm = ComputeNormalization(x);
  EXPECT_NEAR(norm.mean, 5.f, kTolerance);
  EXPECT_NEAR(norm.stddev, 2.2360680f, kTolerance);
}

TEST(NormalizeTest, AppliesInPlace) {
  Tensor x = Tensor::FromVector({1, 3, 5, 7}, {4});
  Normalize(Normalization{3.f, 2.f}, x);
  const std::vector<float> y = x.ToVector();
  const std::vector<float> expected = {-1.f, 0.f, 1.f, 2.f};
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], expected[i], kTolerance);
}

TEST(NormalizeTest, NormalizedDataHasZeroMeanUnitStddev) {
  Tensor x = Tensor::FromVector({0.f, 0.1f, 0.5f, 0.9f, 1.f, 0.25f}, {3, 2});
  Normalize(ComputeNormalization(x), x);
  const Normalization after = ComputeNormalization(x);
  EXPECT_NEAR(after.mean, 0.f, kTolerance);
  EXPECT_NEAR(after.stddev, 1.f, kTolerance);
}

TEST(NormalizeTest, Deterministic) {
  std::vector<float> values(10007);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i * 37 % 256) / 255.f;
  const Tensor x = Tensor::FromVector(values, {10007});
  const Normalization a = ComputeNormalization(x);
  const Normalization b = ComputeNormalization(x.Clone());
  EXPECT_EQ(a.mean, b.mean);  // bit-identical, not merely close
  EXPECT_EQ(a.stddev, b.stddev);
}

TEST(NormalizeTest, ConstantDataKeepsStddevOne) {
  Tensor x = Tensor::Full({3}, 0.5f);
  const Normalization norm = ComputeNormalization(x);
  EXPECT_EQ(norm.mean, 0.5f);
  EXPECT_EQ(norm.stddev, 1.f);
  Normalize(norm, x);
  EXPECT_EQ(x.ToVector(), (std::vector<float>{0.f, 0.f, 0.f}));
}

TEST(NormalizeTest, RejectsInvalidStatistics) {
  Tensor x = Tensor::Zeros({2});
  EXPECT_THROW(Normalize(Normalization{0.f, 0.f}, x), Error);
  EXPECT_THROW(
      Normalize(Normalization{std::numeric_limits<float>::quiet_NaN(), 1.f}, x),
      Error);
  EXPECT_THROW(ComputeNormalization(Tensor()), Error);
}

}  // namespace
}  // namespace data
}  // namespace tandem
