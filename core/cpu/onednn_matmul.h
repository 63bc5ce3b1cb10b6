// One row-major GEMM through a oneDNN matmul on the calling thread:
// c = alpha op(a) op(b) + beta c with float32 or bfloat16 a and b (float32
// accumulation) and float32 c. The CPU backend's GEMMs call it once per
// block of their plan (Note [Blocked GEMM] in cpu_gemm.h): float32 ones
// where oneDNN has AVX-512 kernels (cpu_gemm.h), bfloat16 ones where it has
// AVX-512 BF16 ones (cpu_gemm_bf16.h).
//
//   cpu::OneDnnMatmul({cpu::OneDnnType::kFloat32, false, true, m, n, k, a, k, b, k, c, n},
//                     1.f, 0.f);                      // c = a b^T
//
// oneDNN's own (OpenMP) threads are limited to one on every thread that
// calls it, so a call's bits never depend on a thread count.
#ifndef TANDEM_CORE_CPU_ONEDNN_MATMUL_H_
#define TANDEM_CORE_CPU_ONEDNN_MATMUL_H_

#include <cstdint>
#include <string>

namespace tandem {
namespace cpu {

enum class OneDnnType { kFloat32, kBFloat16 };

// Row-major operands with leading dimensions: a [m, k] (or, with trans_a,
// [k, m]), b [k, n] (or [n, k]), c [m, n]. a and b hold `type` (bfloat16 as
// uint16_t bits).
struct OneDnnGemm {
  OneDnnType type;
  bool trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
};

// c is not read when beta is 0. m, n, k > 0.
void OneDnnMatmul(const OneDnnGemm& g, float alpha, float beta);

// Whether the instruction set oneDNN uses here (DNNL_MAX_CPU_ISA caps it)
// includes AVX-512 (avx512_core), and AVX-512 BF16 (avx512_core_bf16).
bool OneDnnHasAvx512();
bool OneDnnHasAvx512Bf16();
// E.g. "oneDNN 2.6.3".
std::string OneDnnVersion();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_ONEDNN_MATMUL_H_
