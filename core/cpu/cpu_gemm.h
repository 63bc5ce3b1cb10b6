// The CPU backend's float32 GEMM: c = alpha op(a) op(b) + beta c on
// row-major matrices, computed by a library in column or row blocks spread
// over the CPU context's thread pool.
//
//   cpu::GemmPlan plan = cpu::PlanGemm(m, n, k, 8);   // blocks for 8 threads
//   cpu::Gemm(cpu::GemmLibrary::kOneDnn, pool, threads, false, true, m, n, k,
//             1.f, a, b, 0.f, c);                      // c = a b^T
//
// Libraries (Note [Which float32 GEMM library]): oneDNN on CPUs with
// AVX-512, else OpenBLAS, else Eigen (compiled for AVX2); TANDEM_CPU_GEMM
// names one. OpenBLAS is Debian's build for all x86-64 CPUs, loaded at run
// time (core/cpu/openblas.h): its AVX-512 kernels on a CPU with AVX-512,
// else those it picks for the CPU; OPENBLAS_CORETYPE=Haswell forces the
// AVX2 ones. Both run one thread per call (oneDNN's OpenMP threads and
// OpenBLAS's are set to one): the threads are ours, and single-threaded
// calls from several threads at once are safe in both.
//
// Note [Which float32 GEMM library]
// Rule: the library measured fastest on this kind of CPU (dp_cpu_bench's
// step, docs/benchmarks.md "Beside PyTorch on the same cores"). On CPUs
// with AVX-512 that is oneDNN's matmul: as fast as OpenBLAS's AVX-512
// kernels on one thread, faster when several threads call at once (where
// OpenBLAS calls slow each other down) and on narrow products such as a
// 10-class output layer's. Without AVX-512 it is OpenBLAS (oneDNN's float32
// matmul was not measured there).
// Mechanism: GemmLibraryFromEnvironment() asks oneDNN for its instruction
// set (DNNL_MAX_CPU_ISA=AVX2 caps it, which is how a test takes the AVX2
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
// kMinBlockWidth wide and kMinBlockFlops (about 0.2 ms on one core) large. A
// block is a library call: it repacks the operand every block reads and has
// fixed costs, so a thread does best with one block of its own; a single thread
// makes one call. With these bounds a 1024-wide layer's GEMMs make 8 blocks at
// batch 256 on 8 threads (or more), 4 at batch 128 on 4 threads and 2 at 64 on
// 2, so that one worker of 8 threads, or 2 or 4 workers on 8 cores, keep their
// threads busy (docs/benchmarks.md, "Beside PyTorch on the same cores").
// A different thread count splits the output differently, and a narrower call
// may sum in another order than a wider one (oneDNN's column blocks do), so
// results may differ in the last bits between runs with different
// --cpu_threads. Across machines the bits follow the library and the kernels it
// picks for the CPU (AVX2 or AVX-512 ones sum in different orders);
// TANDEM_CPU_GEMM=openblas with OPENBLAS_CORETYPE=Haswell picks the same AVX2
// kernels everywhere.
#ifndef TANDEM_CORE_CPU_CPU_GEMM_H_
#define TANDEM_CORE_CPU_CPU_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cpu/cpu_thread_pool.h"
#include "core/cpu/gemm_operands.h"

namespace tandem {
namespace cpu {

enum class GemmLibrary { kOneDnn, kOpenBlas, kEigen };

// TANDEM_CPU_GEMM: "onednn" (needs AVX-512), "openblas" or "eigen"; throws
// tandem::Error naming the variable for anything else or for oneDNN without
// AVX-512. Unset: oneDNN where it has AVX-512 kernels (Note [Which float32
// GEMM library]), else OpenBLAS, unless its kernels are older than the CPU
// (see Note [OpenBLAS on a CPU it does not know]).
//
// Note [OpenBLAS on a CPU it does not know]
// OpenBLAS picks its kernels from the CPU's identity when it loads; on a CPU
// newer than the library it falls back to older kernels. On CPUs with
// AVX-512 the backend picks the kernels itself (Note [Which OpenBLAS
// kernels] in openblas.h); where it does not (an AVX2 CPU, or
// OPENBLAS_CORETYPE set) and OpenBLAS chose kernels older than AVX2 and FMA
// (Prescott: SSE3, several times slower than Eigen's AVX2 code) on a CPU
// that has them, the GEMMs go to Eigen, and Describe() says so and how to
// override: OPENBLAS_CORETYPE=Haswell (AVX2) makes OpenBLAS use those
// kernels. Where OpenBLAS cannot be loaded, the GEMMs go to Eigen too.
GemmLibrary GemmLibraryFromEnvironment();
// False where OpenBLAS did not load, or where the CPU has AVX2 and FMA but
// OpenBLAS chose older kernels.
bool OpenBlasKernelsFitThisCpu();
// E.g. "oneDNN 2.6.3 (AVX-512)", "OpenBLAS 0.3.21 (Zen kernels)" or
// "Eigen 3.4.0".
std::string Describe(GemmLibrary library);

// How a GEMM's output is split: `count` blocks of `width` columns (or rows;
// the last may be narrower). See Note [Blocked GEMM].
struct GemmPlan {
  bool by_columns = true;
  int64_t count = 1;
  int64_t width = 0;
};
constexpr int64_t kMinBlockWidth = 128;
constexpr double kMinBlockFlops = 40e6;
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
