// The CPU backend's float32 GEMM: c = alpha op(a) op(b) + beta c on
// row-major matrices, computed by a library in column or row blocks spread
// over the CPU context's thread pool.
//
//   cpu::GemmPlan plan = cpu::PlanGemm(m, n, k, 8);   // blocks for 8 threads
//   cpu::Gemm(cpu::GemmLibrary::kOneDnn, pool, threads, false, true, m, n, k,
//             1.f, a, b, 0.f, c);                      // c = a b^T
//
// Libraries (Note [Which float32 GEMM library]): oneDNN on CPUs with
// AVX-512, else Eigen (compiled for AVX2); TANDEM_CPU_GEMM names one. Both
// run one thread per call (oneDNN's OpenMP threads are set to one): the
// threads are ours, and single-threaded calls from several threads at once
// are safe in both.
//
// Note [Which float32 GEMM library]
// Rule: the fewest libraries that keep each CPU the project runs on at the
// fastest measured (docs/benchmarks.md, "The CPU GEMM paths"). On CPUs
// with AVX-512 (the AMD EPYC and Intel Xeon ones) that is oneDNN's matmul:
// about twice Eigen's speed on one thread, at PyTorch's (MKL) speed on the
// Xeon. Elsewhere it is Eigen, the library the backend needs anyway (oneDNN
// refuses float32 below AVX-512; OpenBLAS's AVX2 kernels were within a few
// percent of Eigen's, not worth a third library).
// Mechanism: GemmLibraryFromEnvironment() asks oneDNN for its instruction
// set (DNNL_MAX_CPU_ISA=AVX2 caps it, which is how a test takes the Eigen
// path on an AVX-512 machine).
//
// Note [Blocked GEMM]
// Rule: a GEMM's result depends on its operands, its shape and the worker's
// intra-op thread count, and on nothing else: not on which thread computes
// what, nor on what else runs; a run with the same flags gives the same
// bits.
// Mechanism: PlanGemm splits the output into blocks from (m, n, k) and the
// thread count; each block is one library call over the full k with the
// block's own a or b slice, so every output element comes from the same
// call with the same arguments whichever thread runs it, and the threads
// only decide who makes which call. A block is a set of whole columns
// (n > m) or whole rows (m >= n); a square output goes by rows, whose
// blocks oneDNN's kernels run faster than column blocks.
//
// Note [How many blocks]
// Rule: one block per intra-op thread, as long as each block stays at least
// kMinBlockWidth wide and kMinBlockFlops (about 20 us on one core) large. A
// block is a library call: it repacks the operand every block reads and has
// fixed costs, so a thread does best with one block of its own; a single thread
// makes one call. With these bounds a 1024-wide layer's GEMMs make 8 blocks at
// batch 256 on 8 threads (or more), 4 at batch 128 on 4 threads and 2 at 64 on
// 2, so that one worker of 8 threads, or 2 or 4 workers on 8 cores, keep their
// threads busy (docs/benchmarks.md, "Beside PyTorch on the same cores"); and
// the small GEMMs of examples/gpt (25 to 100 MFLOP, 768 rows) still split,
// since handing a block to a waiting helper costs microseconds.
// A different thread count splits the output differently, and a narrower call
// may sum in another order than a wider one (oneDNN's column blocks do), so
// results may differ in the last bits between runs with different
// --cpu_threads. Across machines the bits follow the library and the kernels it
// picks for the CPU (AVX2 or AVX-512 ones sum in different orders);
// TANDEM_CPU_GEMM=eigen runs the same AVX2 code on every x86-64 CPU with AVX2.
#ifndef TANDEM_CORE_CPU_CPU_GEMM_H_
#define TANDEM_CORE_CPU_CPU_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cpu/cpu_thread_pool.h"
#include "core/cpu/gemm_operands.h"

namespace tandem {
namespace cpu {

enum class GemmLibrary { kOneDnn, kEigen };

// TANDEM_CPU_GEMM: "onednn" (needs AVX-512) or "eigen"; throws tandem::Error
// naming the variable and the valid values for anything else, or for oneDNN
// without AVX-512. Unset: oneDNN where it has AVX-512 kernels, else Eigen
// (Note [Which float32 GEMM library]).
GemmLibrary GemmLibraryFromEnvironment();
// E.g. "oneDNN 2.6.3 (AVX-512)" or "Eigen 3.4.0".
std::string Describe(GemmLibrary library);

// How a GEMM's output is split: `count` blocks of `width` columns (or rows;
// the last may be narrower). See Note [Blocked GEMM].
struct GemmPlan {
  bool by_columns = true;
  int64_t count = 1;
  int64_t width = 0;
};
constexpr int64_t kMinBlockWidth = 128;
constexpr double kMinBlockFlops = 4e6;
// threads >= 1: the intra-op threads of the worker calling.
GemmPlan PlanGemm(int64_t m, int64_t n, int64_t k, int threads);

// The operands of block `index` of `plan` within `whole`.
template <typename T>
GemmOperands<T> SliceGemm(const GemmOperands<T>& whole, const GemmPlan& plan, int64_t index) {
  GemmOperands<T> g = whole;
  const int64_t begin = index * plan.width;
  if (plan.by_columns) {
    g.n = std::min(plan.width, whole.n - begin);
    g.b += whole.trans_b ? begin * whole.ldb : begin;
    g.c += begin;
  } else {
    g.m = std::min(plan.width, whole.m - begin);
    g.a += whole.trans_a ? begin : begin * whole.lda;
    g.c += begin * whole.ldc;
  }
  return g;
}

// Calls `block` (one library call) for each of PlanGemm's blocks of `whole`,
// on up to `threads` threads of `pool` (Note [Blocked GEMM]). k > 0.
template <typename T, typename Block>
void RunGemmBlocks(ThreadPool& pool, int threads, const GemmOperands<T>& whole,
                   const Block& block) {
  const GemmPlan plan = PlanGemm(whole.m, whole.n, whole.k, threads);
  auto run = [&](int64_t index) {
    block(plan.count == 1 ? whole : SliceGemm(whole, plan, index));
  };
  if (plan.count == 1 || threads <= 1) {
    for (int64_t i = 0; i < plan.count; ++i) run(i);
    return;
  }
  pool.ParallelFor(plan.count, threads, run);
}

// c [m, n] = beta c, what a product with k == 0 gives; c is not read when
// beta is 0.
void ScaleOnly(int64_t m, int64_t n, float beta, float* c);

// One library call: c = alpha op(a) op(b) + beta c on g's operands (a block
// of RunGemmBlocks, or a whole GEMM); c is not read when beta is 0.
void GemmBlock(GemmLibrary library, const GemmOperands<float>& g, float alpha, float beta);

// c = alpha op(a) op(b) + beta c, c [m, n]; c is not read when beta is 0.
// Stored shapes: a is [m, k] or, with trans_a, [k, m]; b is [k, n] or, with
// trans_b, [n, k]. Runs PlanGemm's blocks on up to `threads` threads of
// `pool`.
void Gemm(GemmLibrary library, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
          int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_GEMM_H_
