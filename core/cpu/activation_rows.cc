#include "core/cpu/activation_rows.h"

#include "core/check.h"
#include "core/cpu/with_activation.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cpu {
namespace {

// The loops, as the build compiles them; the AVX-512 variants below are the
// same loops under a target attribute.
template <Activation A>
inline void ActivateLoop(const float* x, const float* bias, float* pre, float* out, int64_t n) {
  if (pre != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float z = x[i] + bias[i];
      pre[i] = z;
      out[i] = kernel_math::Activate(A, z);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = kernel_math::Activate(A, x[i] + bias[i]);
  }
}

template <Activation A>
inline void GradLoop(const float* x, const float* dy, float* dz, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dz[i] = dy[i] * kernel_math::ActivateGrad(A, x[i]);
}

#if defined(__x86_64__)
#define TANDEM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
template <Activation A>
TANDEM_AVX512 void ActivateAvx512(const float* x, const float* bias, float* pre, float* out,
                                  int64_t n) {
  ActivateLoop<A>(x, bias, pre, out, n);
}
template <Activation A>
TANDEM_AVX512 void GradAvx512(const float* x, const float* dy, float* dz, int64_t n) {
  GradLoop<A>(x, dy, dz, n);
}
#undef TANDEM_AVX512
#endif

bool DetectAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

ActivationIsa Chosen() {
  static const ActivationIsa isa = DetectAvx512() ? ActivationIsa::kAvx512 : ActivationIsa::kBuild;
  return isa;
}

void CheckAvailable(ActivationIsa isa, const char* name) {
  TANDEM_CHECK(isa == ActivationIsa::kBuild || DetectAvx512())
      << name << ": this CPU has no AVX-512 (F, BW, VL and DQ)";
}

}  // namespace

bool HasAvx512Activations() { return DetectAvx512(); }

void ActivateRowWith(ActivationIsa isa, Activation a, const float* x, const float* bias,
                     float* pre, float* out, int64_t n) {
  CheckAvailable(isa, "ActivateRowWith");
  WithActivation(a, [&](auto act) {
    constexpr Activation kA = decltype(act)::value;
#if defined(__x86_64__)
    if (isa == ActivationIsa::kAvx512) return ActivateAvx512<kA>(x, bias, pre, out, n);
#endif
    ActivateLoop<kA>(x, bias, pre, out, n);
  });
}

void ActivationGradRowWith(ActivationIsa isa, Activation a, const float* x, const float* dy,
                           float* dz, int64_t n) {
  CheckAvailable(isa, "ActivationGradRowWith");
  WithActivation(a, [&](auto act) {
    constexpr Activation kA = decltype(act)::value;
#if defined(__x86_64__)
    if (isa == ActivationIsa::kAvx512) return GradAvx512<kA>(x, dy, dz, n);
#endif
    GradLoop<kA>(x, dy, dz, n);
  });
}

void ActivateRow(Activation a, const float* x, const float* bias, float* pre, float* out,
                 int64_t n) {
  ActivateRowWith(Chosen(), a, x, bias, pre, out, n);
}

void ActivationGradRow(Activation a, const float* x, const float* dy, float* dz, int64_t n) {
  ActivationGradRowWith(Chosen(), a, x, dy, dz, n);
}

}  // namespace cpu
}  // namespace tandem
