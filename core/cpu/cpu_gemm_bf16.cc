#include "core/cpu/cpu_gemm_bf16.h"

#include <omp.h>

#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/check.h"
#include "core/cpu/cpu_gemm.h"

namespace tandem {
namespace cpu {
namespace {

using dnnl::memory;

using Block = GemmOperands<uint16_t>;

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The operands' layouts: row-major, transposed ones by their strides.
struct Layouts {
  memory::desc a, b, c;
};
Layouts LayoutsOf(const Block& g) {
  using dims = memory::dims;
  return {memory::desc({g.m, g.k}, memory::data_type::bf16,
                       g.trans_a ? dims{1, g.lda} : dims{g.lda, 1}),
          memory::desc({g.k, g.n}, memory::data_type::bf16,
                       g.trans_b ? dims{1, g.ldb} : dims{g.ldb, 1}),
          memory::desc({g.m, g.n}, memory::data_type::f32, dims{g.ldc, 1})};
}

// alpha scales the product; beta adds beta c (oneDNN's sum post-op).
dnnl::primitive_attr Scaling(float alpha, float beta) {
  dnnl::primitive_attr attr;
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  if (beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  return attr;
}

// The matmul for these layouts; oneDNN's primitive cache makes repeated
// creations for a shape cheap. Creations take a lock of ours: the cache
// synchronises its threads in ways ThreadSanitizer cannot see (oneDNN is
// not instrumented), and with the lock every creation, and every execution
// of what it made, follows the creations before it in an order it can see.
dnnl::matmul MakeMatmul(const Layouts& l, const dnnl::primitive_attr& attr) {
  static std::mutex creating;
  std::lock_guard<std::mutex> hold(creating);
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(l.a, l.b, l.c), attr,
                                                   Engine()));
}

void RunBlock(const Block& g, float alpha, float beta) {
  // oneDNN's OpenMP threads: one on this thread (the intra-op threads are
  // ours), set once per thread.
  thread_local const bool single = (omp_set_num_threads(1), true);
  (void)single;
  thread_local dnnl::stream stream(Engine());
  const Layouts l = LayoutsOf(g);
  const dnnl::matmul matmul = MakeMatmul(l, Scaling(alpha, beta));
  memory a(l.a, Engine(), const_cast<uint16_t*>(g.a));
  memory b(l.b, Engine(), const_cast<uint16_t*>(g.b));
  memory c(l.c, Engine(), g.c);
  matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  stream.wait();
}

}  // namespace

bool Bf16GemmFast() {
  static const bool fast = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return fast;
}

std::string DescribeBf16Gemm() {
  if (!Bf16GemmFast()) return "float32 GEMM on widened operands";
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (AVX-512 BF16)";
}

void GemmBf16(ThreadPool& pool, int threads, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, const uint16_t* a, const uint16_t* b, float beta,
              float* c) {
  TANDEM_CHECK(Bf16GemmFast()) << "GemmBf16 needs a CPU with bfloat16 dot products";
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c);
  RunGemmBlocks(pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c),
                [&](const Block& g) { RunBlock(g, alpha, beta); });
}

}  // namespace cpu
}  // namespace tandem
