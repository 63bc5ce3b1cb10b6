// An activation over a row, and its gradient, on the CPU's widest vectors:
// the loops of BiasActivation and of the fused activation gradient and
// column sums (cpu_math.h, cpu_column_sums.h).
//
//   cpu::ActivateRow(Activation::kGelu, x, bias, pre, out, n);  // pre = x + bias, out = gelu(pre)
//   cpu::ActivationGradRow(Activation::kGelu, pre, dy, dz, n);  // dz = dy * gelu'(pre)
//
// Note [Activation vectors]
// Rule: on CPUs with AVX-512 (F, BW, VL, DQ) the loops run on 512-bit
// vectors, elsewhere on the build's (AVX2 on x86-64), with the same bits:
// each element goes through the same float32 operations in the same order
// (kernel_math::Activate and ActivateGrad; the build contracts no product
// and sum into an FMA), whatever the vector's width.
// Why: GELU's erf and exp are polynomials and a division per element, the
// bulk of a transformer's non-GEMM time on the CPU; 16 lanes do them in
// about half the instructions of 8 on CPUs with full-width AVX-512 units.
// Mechanism: each loop is compiled twice, once through a target attribute,
// and the first call picks one from the CPU's feature flags, as the
// bfloat16 conversions do (Note [Conversion vectors] in bf16_convert.h).
#ifndef TANDEM_CORE_CPU_ACTIVATION_ROWS_H_
#define TANDEM_CORE_CPU_ACTIVATION_ROWS_H_

#include <cstdint>

#include "core/backend.h"

namespace tandem {
namespace cpu {

// pre[i] = x[i] + bias[i] (pre may be null: not stored), out[i] =
// act(x[i] + bias[i]). out may be x.
void ActivateRow(Activation a, const float* x, const float* bias, float* pre, float* out,
                 int64_t n);
// dz[i] = dy[i] * act'(x[i]); dz may be dy.
void ActivationGradRow(Activation a, const float* x, const float* dy, float* dz, int64_t n);

// The two variants, for tests: kAvx512 needs HasAvx512Activations().
enum class ActivationIsa { kBuild, kAvx512 };
bool HasAvx512Activations();
void ActivateRowWith(ActivationIsa isa, Activation a, const float* x, const float* bias,
                     float* pre, float* out, int64_t n);
void ActivationGradRowWith(ActivationIsa isa, Activation a, const float* x, const float* dy,
                           float* dz, int64_t n);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_ACTIVATION_ROWS_H_
