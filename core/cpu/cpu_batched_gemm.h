// The CPU backend's batched GEMMs: `count` products of one shape, c[i] =
// alpha op(a[i]) op(b[i]) + beta c[i], with a[i] at a + i * stride_a and
// b[i] at b + i * stride_b (a stride of 0 gives every product the same
// matrix) and c dense, [count, m, n]. float32 operands, or bfloat16 ones
// (uint16_t bits); c float32.
//
//   cpu::BatchedGemm(library, pool, threads, false, true, m, n, k, 1.f, q, k,
//                    0.f, scores, {batch, m * hs, n * hs});   // q k^T per head
//
// Note [Batched GEMMs on the CPU]
// Rule: one library call for as many products as it can take. oneDNN's
// matmul takes a batch (3-D layouts, a broadcast operand as a batch
// dimension of 1), so where oneDNN runs the GEMMs (float32 on AVX-512,
// bfloat16 on AVX-512 BF16; Note [Which float32 GEMM library] in
// cpu_gemm.h, Note [bfloat16 GEMMs on the CPU] in cpu_gemm_bf16.h) a chunk
// of the batch is one call. Eigen has no batched GEMM, so a chunk there is
// a loop of single calls. bfloat16 operands where the CPU does not multiply
// bfloat16 are widened once, whole, and take the float32 path.
// Mechanism: the batch is split into chunks of whole products, one per
// intra-op thread, as long as each holds at least kMinBlockFlops of work;
// each chunk is computed on one thread. Where there are fewer products than
// threads and one product is large enough for PlanGemm to split, each
// product is instead one blocked GEMM over all the threads (cpu_gemm.h). As
// in Note [Blocked GEMM], the results depend on the shape and the thread
// count only.
#ifndef TANDEM_CORE_CPU_CPU_BATCHED_GEMM_H_
#define TANDEM_CORE_CPU_CPU_BATCHED_GEMM_H_

#include <cstdint>

#include "core/cpu/cpu_gemm.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {

struct GemmStrides {
  int64_t count = 1;
  int64_t stride_a = 0;  // elements between a[i] and a[i + 1]; 0: one a
  int64_t stride_b = 0;
};

// How a batch is split (Note [Batched GEMMs on the CPU]): `chunks` chunks
// of `per_chunk` products (the last may hold fewer), or, with
// `each_blocked`, every product as one blocked GEMM.
struct BatchPlan {
  bool each_blocked = false;
  int64_t chunks = 1;
  int64_t per_chunk = 1;
};
BatchPlan PlanBatch(int64_t count, int64_t m, int64_t n, int64_t k, int threads);

// c [count, m, n] = alpha op(a[i]) op(b[i]) + beta c[i]; c is not read when
// beta is 0. Stored shapes as cpu::Gemm's.
void BatchedGemm(GemmLibrary library, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
                 int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                 float beta, float* c, const GemmStrides& batch);
// The same with bfloat16 a and b; `widened` is the float32 library where
// the CPU does not multiply bfloat16 (Bf16GemmFast() is false).
void BatchedGemmBf16(GemmLibrary widened, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
                     int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                     const uint16_t* b, float beta, float* c, const GemmStrides& batch);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_BATCHED_GEMM_H_
