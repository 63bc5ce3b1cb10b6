#include "core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(123), b(123), c(124);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    differs |= x != c.NextU64();
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, KnownFirstValueIsStable) {
  // Pinned so a change to the generator (which would change every model's
  // initialisation and every shuffle) cannot slip in unnoticed.
  Rng rng(0);
  const uint64_t first = rng.NextU64();
  Rng again(0);
  EXPECT_EQ(first, again.NextU64());
  EXPECT_EQ(first, 0x99EC5F36CB75F2B4ull);
}

TEST(RngTest, UniformAndNormalMoments) {
  Rng rng(7);
  const int n = 200000;
  double sum = 0, sum_sq = 0, nsum = 0, nsum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    const double z = rng.Normal(1.0f, 2.0f);
    nsum += z;
    nsum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(sum_sq / n - 0.25, 1.0 / 12, 0.01);
  EXPECT_NEAR(nsum / n, 1.0, 0.02);
  EXPECT_NEAR(nsum_sq / n - 1.0, 4.0, 0.1);
}

TEST(RngTest, ShuffleIsADeterministicPermutation) {
  std::vector<int64_t> a(1000), b(1000);
  std::iota(a.begin(), a.end(), 0);
  b = a;
  Rng r1(5), r2(5);
  r1.Shuffle(a);
  r2.Shuffle(b);
  EXPECT_EQ(a, b);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(a[0] + a[1] * 1000, 0 + 1 * 1000);  // not the identity
}

TEST(RngTest, StateRoundTrip) {
  Rng rng(9);
  rng.NextU64();
  const Rng::State saved = rng.state();
  const uint64_t next = rng.NextU64();
  Rng other(1);
  other.set_state(saved);
  EXPECT_EQ(other.NextU64(), next);
}

TEST(RngTest, ForkGivesIndependentReproducibleStreams) {
  Rng base(11);
  EXPECT_EQ(base.Fork(1).NextU64(), base.Fork(1).NextU64());
  EXPECT_NE(base.Fork(1).NextU64(), base.Fork(2).NextU64());
}

}  // namespace
}  // namespace tandem
