// Tests core/cpu/activation_rows.h: both variants of the row loops (the
// build's vectors and, where the CPU has it, AVX-512) give exactly the bits
// of kernel_math::Activate and ActivateGrad taken one element at a time, for
// every activation, over ordinary values, zeros, subnormals, large values,
// infinities and NaNs, and lengths that leave vector tails; outputs in place
// (out = x, dz = dy) too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/activation_rows.h"
#include "core/kernel_math.h"
#include "tests/support/float_bits.h"

namespace tandem {
namespace cpu {
namespace {

using test::BitsOfFloat;
using test::FloatFromBits;

// Special values first, then normals of spread 3.
std::vector<float> Inputs(int64_t n, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.f,  -0.f, 1.f,   -1.f,  0.5f, -3.99f, 4.01f, -12.f, 30.f, -90.f,
                          90.f, 1e30f, -1e30f, inf, -inf, FloatFromBits(0x00000001u),
                          FloatFromBits(0x80400000u), std::nanf("")};
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 3.f);
  while (static_cast<int64_t>(v.size()) < n) v.push_back(normal(gen));
  v.resize(n);
  return v;
}

std::vector<ActivationIsa> Variants() {
  std::vector<ActivationIsa> isas = {ActivationIsa::kBuild};
  if (HasAvx512Activations()) isas.push_back(ActivationIsa::kAvx512);
  return isas;
}

std::string Name(ActivationIsa isa, Activation a, int64_t n) {
  return std::string(isa == ActivationIsa::kAvx512 ? "AVX-512 " : "build ") +
         ActivationName(a) + " n=" + std::to_string(n);
}

// The same bits, or both NaN.
void ExpectSame(float got, float want, const std::string& what, int64_t i) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << " i=" << i << ": got " << got;
  } else {
    EXPECT_EQ(BitsOfFloat(got), BitsOfFloat(want))
        << what << " i=" << i << ": got " << got << ", want " << want;
  }
}

TEST(ActivationRowsTest, ActivateRowGivesTheElementwiseBits) {
  for (ActivationIsa isa : Variants()) {
    for (Activation a : kActivations) {
      for (int64_t n : {0, 1, 7, 8, 9, 16, 17, 31, 33, 130, 1000}) {
        const std::string what = Name(isa, a, n);
        const std::vector<float> x = Inputs(n, 1), bias = Inputs(n, 2);
        std::vector<float> pre(n + 1, 7.f), out(n + 1, 7.f);
        ActivateRowWith(isa, a, x.data(), bias.data(), pre.data(), out.data(), n);
        std::vector<float> in_place = x;  // out = x, no pre
        ActivateRowWith(isa, a, in_place.data(), bias.data(), nullptr, in_place.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const float z = x[i] + bias[i];
          ExpectSame(pre[i], z, what + " pre", i);
          ExpectSame(out[i], kernel_math::Activate(a, z), what + " out", i);
          ExpectSame(in_place[i], kernel_math::Activate(a, z), what + " in place", i);
        }
        EXPECT_EQ(pre[n], 7.f) << what << ": wrote past n";
        EXPECT_EQ(out[n], 7.f) << what << ": wrote past n";
      }
    }
  }
}

TEST(ActivationRowsTest, ActivationGradRowGivesTheElementwiseBits) {
  for (ActivationIsa isa : Variants()) {
    for (Activation a : kActivations) {
      for (int64_t n : {0, 1, 7, 8, 9, 16, 17, 31, 33, 130, 1000}) {
        const std::string what = Name(isa, a, n);
        const std::vector<float> x = Inputs(n, 3), dy = Inputs(n, 4);
        std::vector<float> dz(n + 1, 7.f);
        ActivationGradRowWith(isa, a, x.data(), dy.data(), dz.data(), n);
        std::vector<float> in_place = dy;  // dz = dy
        ActivationGradRowWith(isa, a, x.data(), in_place.data(), in_place.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const float want = dy[i] * kernel_math::ActivateGrad(a, x[i]);
          ExpectSame(dz[i], want, what, i);
          ExpectSame(in_place[i], want, what + " in place", i);
        }
        EXPECT_EQ(dz[n], 7.f) << what << ": wrote past n";
      }
    }
  }
}

TEST(ActivationRowsTest, AnAvx512VariantIsRefusedWhereTheCpuHasNone) {
  if (HasAvx512Activations()) GTEST_SKIP() << "this CPU has AVX-512";
  float x = 1.f, out = 0.f;
  EXPECT_THROW(
      ActivateRowWith(ActivationIsa::kAvx512, Activation::kGelu, &x, &x, nullptr, &out, 1),
      std::exception);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
