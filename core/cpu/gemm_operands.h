// A row-major GEMM's operands, as the CPU backend's GEMM libraries take
// them: the whole product, or one block of it (cpu_gemm.h's SliceGemm).
//
//   cpu::GemmOperands<float> g = cpu::WholeGemm(false, true, m, n, k, a, b, c);
#ifndef TANDEM_CORE_CPU_GEMM_OPERANDS_H_
#define TANDEM_CORE_CPU_GEMM_OPERANDS_H_

#include <cstdint>

namespace tandem {
namespace cpu {

// A GEMM's operands, row-major with leading dimensions: a [m, k] (or, with
// trans_a, [k, m]), b [k, n] (or [n, k]), c [m, n]. T: the type of a and b
// (float, or uint16_t for bfloat16 bits).
template <typename T>
struct GemmOperands {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
};

// The operands of a GEMM on whole, densely stored matrices.
template <typename T>
GemmOperands<T> WholeGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          const T* a, const T* b, float* c) {
  return {trans_a, trans_b, m, n, k, a, trans_a ? m : k, b, trans_b ? k : n, c, n};
}

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_GEMM_OPERANDS_H_
