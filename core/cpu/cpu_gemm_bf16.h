// The CPU backend's bfloat16 GEMM: c = alpha op(a) op(b) + beta c with a and
// b in bfloat16 and c in float32 (float32 accumulation), row-major: through
// oneDNN's bfloat16 matmul on CPUs whose instruction set multiplies
// bfloat16 itself (AVX-512 BF16 and later), elsewhere through the float32
// GEMM on widened operands.
//
//   cpu::GemmBf16(library, pool, threads, false, true, m, n, k, 1.f, a_bits,
//                 b_bits, 0.f, c);
//
// Note [bfloat16 GEMMs on the CPU]
// Rule: bfloat16 GEMMs read their operands as they are where the CPU has
// bfloat16 dot products, which do twice the multiply-adds of a float32 FMA
// per instruction; elsewhere they widen the operands to float32 and run the
// float32 GEMM (oneDNN's bfloat16 matmul without those instructions emulates
// them, slower than the float32 GEMM).
// Mechanism: Bf16GemmFast() asks oneDNN which instruction set it uses
// (DNNL_MAX_CPU_ISA=AVX512_CORE in the environment caps it, which is how a
// test takes the other path on such a CPU). GemmBf16 splits the output into
// PlanGemm's blocks (Note [Blocked GEMM] in cpu_gemm.h) and makes one
// single-threaded library call per block, so the bits do not depend on the
// thread count.
//
// Note [Widening a block at a time]
// Rule: on the widened path the operand that PlanGemm splits (b for blocks
// of columns, a for blocks of rows) is widened one block's slice at a time,
// by the thread that runs the block and just before its call, into that
// thread's scratch memory (core/cpu/scratch.h); the other operand, which
// every block reads whole, is widened once. The slice is then still in that
// core's cache when the library packs it, instead of the whole operand
// passing through memory twice, as a float32 copy written and then read.
#ifndef TANDEM_CORE_CPU_CPU_GEMM_BF16_H_
#define TANDEM_CORE_CPU_CPU_GEMM_BF16_H_

#include <cstdint>
#include <string>

#include "core/cpu/cpu_gemm.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {

// Whether oneDNN multiplies bfloat16 with the CPU's own instructions here.
bool Bf16GemmFast();
// E.g. "oneDNN 2.6.3 (AVX-512 BF16)" or "float32 GEMM on widened operands
// (AVX-512 conversions)".
std::string DescribeBf16Gemm();

// c [m, n] = alpha op(a) op(b) + beta c; a is [m, k] or, with trans_a,
// [k, m]; b is [k, n] or, with trans_b, [n, k]; a and b hold bfloat16 bits.
// c is not read when beta is 0. `widened` is the float32 GEMM library of
// the widened path (unused where Bf16GemmFast()).
void GemmBf16(GemmLibrary widened, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
              int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
              const uint16_t* b, float beta, float* c);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_GEMM_BF16_H_
