// One row-major GEMM through a oneDNN matmul on the calling thread:
// c = alpha op(a) op(b) + beta c with float32 or bfloat16 a and b (float32
// accumulation) and float32 c. The CPU backend's GEMMs call it once per
// block of their plan (Note [Blocked GEMM] in cpu_gemm.h): float32 ones
// where oneDNN has AVX-512 kernels (cpu_gemm.h), bfloat16 ones where it has
// AVX-512 BF16 ones (cpu_gemm_bf16.h).
//
//   cpu::OneDnnMatmul(cpu::WholeGemm(false, true, m, n, k, a, b, c), 1.f, 0.f);
//                                                    // c = a b^T
//
// oneDNN's own (OpenMP) threads are limited to one for each call, so a
// call's bits never depend on a thread count; the calling thread's OpenMP
// thread count is put back when the call returns.
#ifndef TANDEM_CORE_CPU_ONEDNN_MATMUL_H_
#define TANDEM_CORE_CPU_ONEDNN_MATMUL_H_

#include <cstdint>
#include <string>

#include "core/cpu/gemm_operands.h"

namespace tandem {
namespace cpu {

// `count` products of one shape in one call: the i-th reads a + i *
// stride_a and b + i * stride_b (elements; a stride of 0 gives every
// product the same matrix) and writes c + i * m * ldc.
struct MatmulBatch {
  int64_t count = 1;
  int64_t stride_a = 0;
  int64_t stride_b = 0;
};

// c = alpha op(a) op(b) + beta c for float32 or bfloat16 (uint16_t bits) a
// and b, for each product of `batch` (one by default); c is not read when
// beta is 0. m, n, k > 0.
void OneDnnMatmul(const GemmOperands<float>& g, float alpha, float beta,
                  const MatmulBatch& batch = {});
void OneDnnMatmul(const GemmOperands<uint16_t>& g, float alpha, float beta,
                  const MatmulBatch& batch = {});

// Whether the instruction set oneDNN uses here (DNNL_MAX_CPU_ISA caps it)
// includes AVX-512 (avx512_core), and AVX-512 BF16 (avx512_core_bf16).
bool OneDnnHasAvx512();
bool OneDnnHasAvx512Bf16();
// E.g. "oneDNN 2.6.3".
std::string OneDnnVersion();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_ONEDNN_MATMUL_H_
