// The CPU backend's bfloat16 GEMM: c = alpha op(a) op(b) + beta c with a and
// b in bfloat16 and c in float32 (float32 accumulation), row-major, through
// oneDNN's matmul on CPUs whose instruction set multiplies bfloat16 itself
// (AVX-512 BF16 and later).
//
//   if (cpu::Bf16GemmFast()) cpu::GemmBf16(pool, threads, false, true, m, n, k,
//                                          1.f, a_bits, b_bits, 0.f, c);
//
// Note [bfloat16 GEMMs on the CPU]
// Rule: bfloat16 GEMMs read their operands as they are where the CPU has
// bfloat16 dot products, which do twice the multiply-adds of a float32 FMA
// per instruction; elsewhere the backend widens the operands and runs the
// float32 GEMM (oneDNN's bfloat16 matmul without those instructions emulates
// them, slower than the float32 GEMM).
// Mechanism: Bf16GemmFast() asks oneDNN which instruction set it uses
// (DNNL_MAX_CPU_ISA=AVX512_CORE in the environment caps it, which is how a
// test takes the other path on such a CPU). GemmBf16 splits the output into
// PlanGemm's blocks (Note [Blocked GEMM] in cpu_gemm.h) and runs one
// single-threaded oneDNN matmul per block (oneDNN's OpenMP threads are
// limited to one on every thread that calls it), so the bits do not depend
// on the thread count.
#ifndef TANDEM_CORE_CPU_CPU_GEMM_BF16_H_
#define TANDEM_CORE_CPU_CPU_GEMM_BF16_H_

#include <cstdint>
#include <string>

#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {

// Whether oneDNN multiplies bfloat16 with the CPU's own instructions here.
bool Bf16GemmFast();
// E.g. "oneDNN 2.6.3 (avx512_core_bf16)" or "float32 GEMM on widened operands".
std::string DescribeBf16Gemm();

// c [m, n] = alpha op(a) op(b) + beta c; a is [m, k] or, with trans_a,
// [k, m]; b is [k, n] or, with trans_b, [n, k]; a and b hold bfloat16 bits.
// c is not read when beta is 0. Needs Bf16GemmFast().
void GemmBf16(ThreadPool& pool, int threads, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, const uint16_t* a, const uint16_t* b, float beta,
              float* c);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_GEMM_BF16_H_
