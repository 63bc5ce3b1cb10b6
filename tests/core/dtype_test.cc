// core/dtype.h: the bfloat16 conversions (round to nearest even, ties, NaN
// and infinities, the largest finite value, subnormals), checked against
// hand-written bit patterns and an independent nearest-value search; then
// bfloat16 tensors (core/tensor.h) on every device.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/support/device_test.h"
#include "tests/support/float_bits.h"

namespace tandem {
namespace {

using test::BitsOfFloat;
using test::FloatFromBits;

bool IsNanBits(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(DTypeTest, NamesSizesAndParsing) {
  EXPECT_STREQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(SizeOf(DType::kFloat32), 4u);
  EXPECT_EQ(SizeOf(DType::kBFloat16), 2u);
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("float32"), DType::kFloat32);
  try {
    ParseDType("float16");
    FAIL() << "float16 parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dtype 'float16'"), std::string::npos)
        << e.what();
  }
}

TEST(DTypeTest, ExactValuesConvertExactly) {
  EXPECT_EQ(FloatToBFloat16Bits(1.f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(-2.f), 0xc000);
  EXPECT_EQ(FloatToBFloat16Bits(0.f), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(-0.f), 0x8000);
  EXPECT_EQ(BFloat16BitsToFloat(0x3f80), 1.f);
  EXPECT_EQ(BFloat16BitsToFloat(0x4049), 3.140625f);
  // 0.1 rounds to 0x3dcd = 0.10009765625 (the header's example).
  EXPECT_EQ(FloatToBFloat16Bits(0.1f), 0x3dcd);
  EXPECT_EQ(BFloat16BitsToFloat(0x3dcd), 0.10009765625f);
}

// Between 1 and 2 bfloat16 steps by 2^-7; float32 by 2^-23.
TEST(DTypeTest, RoundsToNearestWithTiesToEven) {
  const float step = std::ldexp(1.f, -7);
  // Exactly halfway between 1 (even mantissa) and 1 + 2^-7 (odd): down.
  EXPECT_EQ(FloatToBFloat16Bits(1.f + step / 2), 0x3f80);
  // Halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(FloatToBFloat16Bits(1.f + 3 * step / 2), 0x3f82);
  // Just off the tie: the nearer neighbour.
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(BitsOfFloat(1.f + step / 2) + 1)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(BitsOfFloat(1.f + step / 2) - 1)), 0x3f80);
  // Negative values mirror positive ones.
  EXPECT_EQ(FloatToBFloat16Bits(-(1.f + 3 * step / 2)), 0xbf82);
  // Rounding up can carry into the exponent: 1.99999988 -> 2.
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x3fffffffu)), 0x4000);
  EXPECT_EQ(RoundToBFloat16(FloatFromBits(0x3fffffffu)), 2.f);
}

TEST(DTypeTest, InfinitiesNansAndTheLargestFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBFloat16Bits(inf), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(-inf), 0xff80);
  EXPECT_TRUE(std::isinf(BFloat16BitsToFloat(0x7f80)));
  // NaN stays NaN, quiet, with its sign, even when its payload lies only in
  // the low 16 bits that truncation would drop (which would make infinity).
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const uint16_t b = FloatToBFloat16Bits(FloatFromBits(nan));
    EXPECT_TRUE(IsNanBits(b)) << std::hex << nan << " -> " << b;
    EXPECT_TRUE(b & 0x40u) << "quiet bit of " << std::hex << b;
    EXPECT_EQ(b & 0x8000u, (nan >> 16) & 0x8000u) << "sign of " << std::hex << nan;
    EXPECT_TRUE(std::isnan(RoundToBFloat16(FloatFromBits(nan))));
  }
  // The largest finite bfloat16 is 0x7f7f = (2 - 2^-7) 2^127.
  const float max_bf16 = std::ldexp(2.f - std::ldexp(1.f, -7), 127);
  EXPECT_EQ(BFloat16BitsToFloat(0x7f7f), max_bf16);
  EXPECT_EQ(FloatToBFloat16Bits(max_bf16), 0x7f7f);
  // Below the midpoint to 2^128 it stays finite; the midpoint is a tie with
  // an odd mantissa, so it rounds up to infinity, as does FLT_MAX.
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(-std::numeric_limits<float>::max()), 0xff80);
}

TEST(DTypeTest, SubnormalsAreKeptNotFlushed) {
  // The smallest bfloat16 subnormal is 2^-133; the smallest normal 2^-126.
  EXPECT_EQ(BFloat16BitsToFloat(0x0001), std::ldexp(1.f, -133));
  EXPECT_EQ(FloatToBFloat16Bits(std::ldexp(1.f, -133)), 0x0001);
  EXPECT_EQ(FloatToBFloat16Bits(std::ldexp(1.f, -126)), 0x0080);
  EXPECT_EQ(FloatToBFloat16Bits(-std::ldexp(3.f, -133)), 0x8003);
  // Ties among subnormals go to even: half of 2^-133 to 0, 1.5 of it to 2.
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x00008000u)), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x00018000u)), 0x0002);
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x00008001u)), 0x0001);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(FloatToBFloat16Bits(FloatFromBits(0x007fffffu)), 0x0080);
}

// Every bfloat16 but NaN survives the round trip through float.
TEST(DTypeTest, EveryBFloat16RoundTrips) {
  int checked = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    if (IsNanBits(bits)) continue;
    ASSERT_EQ(FloatToBFloat16Bits(BFloat16BitsToFloat(bits)), bits) << std::hex << b;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 127);
}

// The nearest bfloat16 found another way: the two candidates around x (its
// truncation and the next value up in magnitude), compared in double, ties
// to the even mantissa.
uint16_t NearestBFloat16(float x) {
  const uint16_t lo = static_cast<uint16_t>(BitsOfFloat(x) >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dlo = std::fabs(double(BFloat16BitsToFloat(lo)) - x);
  const double dhi = std::fabs(double(BFloat16BitsToFloat(hi)) - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) == 0 ? lo : hi;
}

TEST(DTypeTest, MatchesTheNearestValueOnRandomFloats) {
  Rng rng(17);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns cover every exponent; NaN and infinity (0xff) are
    // tested above and have no finite neighbours.
    uint32_t bits = static_cast<uint32_t>(rng.NextU64());
    if (((bits >> 23) & 0xffu) == 0xffu) continue;
    // Keep the top candidate finite (it is infinity only above the largest
    // finite value, which the previous test covers).
    if ((bits & 0x7fffffffu) > 0x7f7f0000u) continue;
    const float x = FloatFromBits(bits);
    ASSERT_EQ(FloatToBFloat16Bits(x), NearestBFloat16(x)) << std::hex << bits;
  }
}

// ---- bfloat16 tensors, on every device ----

using testing::DeviceTest;
class BFloat16TensorTest : public DeviceTest {};

TEST_P(BFloat16TensorTest, FromVectorRoundsAndToVectorWidens) {
  const std::vector<float> values = {1.f, 0.1f, 3.14159265f, -2.5f, 1e30f, 65504.f};
  Tensor t = Tensor::FromVector(values, {2, 3}, device(), DType::kBFloat16);
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  EXPECT_EQ(t.bytes(), 6u * 2);
  const std::vector<float> back = t.ToVector();
  ASSERT_EQ(back.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(back[i], RoundToBFloat16(values[i])) << "element " << i;
  }
  EXPECT_EQ(back[1], 0.10009765625f);
  // Zeros and Full fill in bfloat16 on the device.
  EXPECT_EQ(Tensor::Zeros({5}, device(), DType::kBFloat16).ToVector(),
            std::vector<float>(5, 0.f));
  EXPECT_EQ(Tensor::Full({1}, 0.1f, device(), DType::kBFloat16).Item(), 0.10009765625f);
}

TEST_P(BFloat16TensorTest, CloneToAndSliceKeepTheDType) {
  Tensor t = Tensor::FromVector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3}, device(),
                                DType::kBFloat16);
  Tensor clone = t.Clone();
  EXPECT_EQ(clone.dtype(), DType::kBFloat16);
  EXPECT_FALSE(clone.SharesStorageWith(t));
  EXPECT_EQ(clone.ToVector(), t.ToVector());
  Tensor host = t.To(Device::Cpu());
  EXPECT_EQ(host.dtype(), DType::kBFloat16);
  EXPECT_EQ(host.To(device()).ToVector(), t.ToVector());
  // A slice starts rows * cols * 2 bytes in.
  Tensor rows = t.Slice(1, 3);
  EXPECT_EQ(rows.dtype(), DType::kBFloat16);
  EXPECT_EQ(static_cast<char*>(rows.raw_data()) - static_cast<char*>(t.raw_data()), 1 * 3 * 2);
  EXPECT_EQ(rows.bytes(), 2u * 3 * 2);
  EXPECT_EQ(rows.ToVector(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  rows.CopyFrom(Tensor::FromVector({-1, -2, -3, -4, -5, -6}, {2, 3}, Device::Cpu(),
                                   DType::kBFloat16));
  EXPECT_EQ(t.ToVector(), (std::vector<float>{0, 1, 2, -1, -2, -3, -4, -5, -6, 9, 10, 11}));
  EXPECT_EQ(t.Reshape({12}).dtype(), DType::kBFloat16);
}

TEST_P(BFloat16TensorTest, DTypeErrorsNameTheDTypes) {
  Tensor h = Tensor::Zeros({2, 3}, device(), DType::kBFloat16);
  try {
    h.CopyFrom(Tensor::Zeros({2, 3}, device()));
    FAIL() << "CopyFrom across dtypes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "CopyFrom: source is float32 but destination bfloat16"),
              std::string::npos)
        << e.what();
  }
  try {
    h.data();
    FAIL() << "data() of a bfloat16 tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data() of a bfloat16 tensor [2, 3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(h.raw_data());
}

// ops::Cast converts both ways on the device, rounding to nearest even.
TEST_P(BFloat16TensorTest, CastRoundTrips) {
  const float step = std::ldexp(1.f, -7);
  const std::vector<float> values = {1.f + step / 2, 1.f + 3 * step / 2, 0.1f, -7.25f,
                                     std::ldexp(3.f, -133), 1e38f, 0.f};
  Tensor f = Tensor::FromVector(values, {7}, device());
  Tensor h = Tensor::Empty({7}, device(), DType::kBFloat16);
  ops::Cast(f, h);
  Tensor back = Tensor::Empty({7}, device());
  ops::Cast(h, back);
  const std::vector<float> got = back.ToVector();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(BitsOfFloat(got[i]), BitsOfFloat(RoundToBFloat16(values[i]))) << "element " << i;
  }
  EXPECT_EQ(got[0], 1.f);             // tie to even, down
  EXPECT_EQ(got[1], 1.f + 2 * step);  // tie to even, up
  // Infinities stay infinite and NaN NaN (its payload may differ by device).
  const float inf = std::numeric_limits<float>::infinity();
  Tensor special = Tensor::FromVector({inf, -inf, std::nanf("")}, {3}, device());
  Tensor narrow = Tensor::Empty({3}, device(), DType::kBFloat16);
  ops::Cast(special, narrow);
  const std::vector<float> s = narrow.ToVector();
  EXPECT_EQ(s[0], inf);
  EXPECT_EQ(s[1], -inf);
  EXPECT_TRUE(std::isnan(s[2]));
}

INSTANTIATE_DEVICE_TEST_SUITE_P(BFloat16TensorTest);

}  // namespace
}  // namespace tandem
