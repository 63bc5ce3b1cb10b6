// Scalar math shared by the CPU backend and the CUDA kernels, so both compute
// the same function (the CPU-vs-CUDA parity tests rely on it).
#ifndef TANDEM_CORE_KERNEL_MATH_H_
#define TANDEM_CORE_KERNEL_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/backend.h"
#include "core/host_device.h"
#include "core/rng.h"


namespace tandem {
namespace kernel_math {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// erf(x) in float32, within relative 5e-7 of it (a few units in the last
// place; libm's erff is correctly rounded): a rational function of degree
// 13/8 on [-4, 4], outside which erf(x) rounds to +-1 (the interpolant of
// Eigen's generic_fast_erf_float). Free of calls and of branches but the
// clamp, so the CPU loops that call it vectorise, where libm's erff is a
// call per element. NaN stays NaN.
TANDEM_HOST_DEVICE float Erf(float x) {
  const float c = x > 4.f ? 4.f : (x < -4.f ? -4.f : x);
  const float c2 = c * c;
  float p = c2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = c2 * p + -2.10102402082508e-06f;
  p = c2 * p + -5.69250639462346e-05f;
  p = c2 * p + -7.34990630326855e-04f;
  p = c2 * p + -2.95459980854025e-03f;
  p = c2 * p + -1.60960333262415e-02f;
  float q = c2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = c2 * q + -1.68282697438203e-03f;
  q = c2 * q + -7.37332916720468e-03f;
  q = c2 * q + -1.42647390514189e-02f;
  return c * p / q;
}

// exp(x) in float32, to a few units in the last place for x in [-87.3,
// 88.4]; below, the smallest normal float (about 1.2e-38) instead of 0 or a
// subnormal, above, about 2.1e38 for infinity: Cephes' expf, x = n ln 2 + r
// with |r| <= ln 2 / 2, a degree-6 polynomial for exp(r), 2^n from the
// exponent bits. Free of calls and of branches but the clamps, so the CPU
// loops that call it vectorise. NaN stays NaN.
TANDEM_HOST_DEVICE float Exp(float x) {
  const float c = x > 88.3762626647949f ? 88.3762626647949f
                                        : (x < -87.3365447505531f ? -87.3365447505531f : x);
  // n = round(c / ln 2): adding and taking away 1.5 * 2^23 rounds to a whole number.
  const float rounded = (c * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const float n = rounded == rounded ? rounded : 0.f;  // NaN: any n; r stays NaN
  float r = c - n * 0.693359375f;  // ln 2 in two parts, the first exact in float
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// Exact (erf) GELU, as torch.nn.GELU() computes by default.
TANDEM_HOST_DEVICE float Activate(Activation a, float x) {
  switch (a) {
    case Activation::kRelu: return x > 0.f ? x : 0.f;
    case Activation::kGelu: return 0.5f * x * (1.f + Erf(x * kInvSqrt2));
    case Activation::kTanh: return tanhf(x);
    case Activation::kSigmoid: return 1.f / (1.f + expf(-x));
    case Activation::kSilu: return x / (1.f + expf(-x));
    case Activation::kIdentity: default: return x;
  }
}

// d act(x) / dx
TANDEM_HOST_DEVICE float ActivateGrad(Activation a, float x) {
  switch (a) {
    case Activation::kRelu: return x > 0.f ? 1.f : 0.f;
    case Activation::kGelu:
      return 0.5f * (1.f + Erf(x * kInvSqrt2)) +
             x * kInvSqrt2Pi * Exp(-0.5f * x * x);
    case Activation::kTanh: {
      const float t = tanhf(x);
      return 1.f - t * t;
    }
    case Activation::kSigmoid: {
      const float s = 1.f / (1.f + expf(-x));
      return s * (1.f - s);
    }
    case Activation::kSilu: {
      const float s = 1.f / (1.f + expf(-x));
      return s * (1.f + x * (1.f - s));
    }
    case Activation::kIdentity: default: return 1.f;
  }
}

// Calls fn(std::integral_constant<Activation, A>()) for the runtime
// activation `a`, so that a loop or kernel is compiled once per entry of
// kActivations (and Activate's switch folds away) instead of switching per
// element. Returns false for a value outside kActivations. Host code.
template <typename Fn, size_t... I>
bool VisitActivationAt(Activation a, Fn& fn, std::index_sequence<I...>) {
  return ((a == kActivations[I]
               ? (fn(std::integral_constant<Activation, kActivations[I]>()), true)
               : false) ||
          ...);
}

template <typename Fn>
bool VisitActivation(Activation a, Fn&& fn) {
  constexpr size_t n = sizeof(kActivations) / sizeof(kActivations[0]);
  return VisitActivationAt(a, fn, std::make_index_sequence<n>());
}

TANDEM_HOST_DEVICE float DropoutScale(float p, uint64_t seed, uint64_t index) {
  const uint64_t z = HashU64(seed, index);
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return u < p ? 0.f : 1.f / (1.f - p);
}

TANDEM_HOST_DEVICE void SgdStep(const SgdParams& s, float& param, float grad,
                                float* velocity) {
  float g = grad + s.weight_decay * param;
  if (velocity != nullptr) {
    const float v = s.momentum * *velocity + g;
    *velocity = v;
    g = s.nesterov ? g + s.momentum * v : v;
  }
  param -= s.lr * g;
}

// bias1 = 1 - beta1^step, bias2 = 1 - beta2^step, computed once per update.
TANDEM_HOST_DEVICE void AdamWStep(const AdamWParams& s, float bias1,
                                  float bias2, float& param, float grad,
                                  float& m, float& v) {
  param -= s.lr * s.weight_decay * param;
  m = s.beta1 * m + (1.f - s.beta1) * grad;
  v = s.beta2 * v + (1.f - s.beta2) * grad * grad;
  const float m_hat = m / bias1;
  const float v_hat = v / bias2;
  param -= s.lr * m_hat / (sqrtf(v_hat) + s.eps);
}

}  // namespace kernel_math
}  // namespace tandem

#endif  // TANDEM_CORE_KERNEL_MATH_H_
