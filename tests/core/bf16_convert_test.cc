// Tests core/cpu/bf16_convert.h: both variants of the array conversions
// (the build's vectors and, where the CPU has it, AVX-512) give exactly the
// bits of core/dtype.h's scalar conversions, over every float32 class
// (zeros, subnormals, ties, the largest finite values, infinities, NaNs) and
// lengths that leave vector tails; and the dispatch picks AVX-512 where the
// CPU has it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu/bf16_convert.h"
#include "core/dtype.h"
#include "tests/support/float_bits.h"

namespace tandem {
namespace cpu {
namespace {

using test::FloatFromBits;

// Special values first, then random bit patterns (every exponent).
std::vector<float> Inputs(int64_t n) {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 0.1f,
                          FloatFromBits(0x00000001u),   // smallest subnormal
                          FloatFromBits(0x3f808000u),   // tie, even below: rounds down
                          FloatFromBits(0x3f818000u),   // tie, odd below: rounds up
                          FloatFromBits(0x7f7fffffu),   // largest finite: rounds to inf
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          FloatFromBits(0x7f800001u),   // signalling NaN: must stay NaN
                          FloatFromBits(0xffc00000u),   // negative quiet NaN
                          FloatFromBits(0x7fffffffu)};
  std::mt19937 gen(5);
  while (static_cast<int64_t>(v.size()) < n) {
    v.push_back(FloatFromBits(static_cast<uint32_t>(gen())));
  }
  v.resize(n);
  return v;
}

std::vector<ConversionIsa> Variants() {
  std::vector<ConversionIsa> isas = {ConversionIsa::kBuild};
  if (HasAvx512Conversions()) isas.push_back(ConversionIsa::kAvx512);
  return isas;
}

const char* Name(ConversionIsa isa) {
  return isa == ConversionIsa::kAvx512 ? "AVX-512" : "build";
}

TEST(Bf16ConvertTest, RoundMatchesScalarBits) {
  for (ConversionIsa isa : Variants()) {
    for (int64_t n : {0, 1, 7, 14, 15, 16, 17, 33, 64, 1000, 4099}) {
      const std::vector<float> in = Inputs(n);
      std::vector<uint16_t> got(n + 1, 0xabcd);
      RoundToBFloat16With(isa, in.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], FloatToBFloat16Bits(in[i])) << Name(isa) << " n=" << n << " i=" << i;
      }
      EXPECT_EQ(got[n], 0xabcd) << Name(isa) << ": wrote past n=" << n;
    }
  }
}

TEST(Bf16ConvertTest, NaNsStayNaN) {
  for (ConversionIsa isa : Variants()) {
    const float nans[] = {FloatFromBits(0x7f800001u), FloatFromBits(0xff800001u),
                          FloatFromBits(0x7fc00000u)};
    uint16_t out[3];
    RoundToBFloat16With(isa, nans, out, 3);
    for (uint16_t bits : out) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(bits))) << Name(isa) << " " << bits;
    }
  }
}

TEST(Bf16ConvertTest, WidenMatchesScalar) {
  for (ConversionIsa isa : Variants()) {
    for (int64_t n : {0, 1, 15, 16, 17, 1000, 70000}) {
      std::vector<uint16_t> in(n);
      for (int64_t i = 0; i < n; ++i) in[i] = static_cast<uint16_t>(i * 40503u);
      std::vector<float> got(n + 1, 7.f);
      WidenBFloat16With(isa, in.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float want = BFloat16BitsToFloat(in[i]);
        ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0)
            << Name(isa) << " n=" << n << " i=" << i;
      }
      EXPECT_EQ(got[n], 7.f) << Name(isa) << ": wrote past n=" << n;
    }
  }
}

TEST(Bf16ConvertTest, DispatchPicksTheWidestVectors) {
  if (HasAvx512Conversions()) {
    EXPECT_STREQ(ConversionVectors(), "AVX-512");
  } else {
    EXPECT_STRNE(ConversionVectors(), "AVX-512");
  }
  const std::vector<float> in = Inputs(100);
  std::vector<uint16_t> dispatched(100), build(100);
  RoundToBFloat16(in.data(), dispatched.data(), 100);
  RoundToBFloat16With(ConversionIsa::kBuild, in.data(), build.data(), 100);
  EXPECT_EQ(dispatched, build);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
