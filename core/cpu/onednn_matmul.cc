#include "core/cpu/onednn_matmul.h"

#include <omp.h>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <type_traits>

namespace tandem {
namespace cpu {
namespace {

using dnnl::memory;

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// a's and b's element type: float32, or bfloat16 bits.
template <typename T>
constexpr memory::data_type kDataType =
    std::is_same<T, float>::value ? memory::data_type::f32 : memory::data_type::bf16;

// The operands' layouts: row-major, transposed ones by their strides.
struct Layouts {
  memory::desc a, b, c;
};

template <typename T>
Layouts LayoutsOf(const GemmOperands<T>& g) {
  using dims = memory::dims;
  const memory::data_type in = kDataType<T>;
  return {memory::desc({g.m, g.k}, in, g.trans_a ? dims{1, g.lda} : dims{g.lda, 1}),
          memory::desc({g.k, g.n}, in, g.trans_b ? dims{1, g.ldb} : dims{g.ldb, 1}),
          memory::desc({g.m, g.n}, memory::data_type::f32, dims{g.ldc, 1})};
}

// A batch of `batch.count` products as 3-D layouts: [count, rows, cols]
// with the batch's strides; an operand of stride 0 has a batch dimension of
// 1, which the matmul broadcasts over the others.
template <typename T>
Layouts BatchedLayoutsOf(const GemmOperands<T>& g, const MatmulBatch& batch) {
  using dims = memory::dims;
  const memory::data_type in = kDataType<T>;
  const int64_t count_a = batch.stride_a == 0 ? 1 : batch.count;
  const int64_t count_b = batch.stride_b == 0 ? 1 : batch.count;
  // The stride of a batch dimension of 1 is never used; any positive one does.
  const int64_t stride_a = batch.stride_a == 0 ? g.m * g.k : batch.stride_a;
  const int64_t stride_b = batch.stride_b == 0 ? g.k * g.n : batch.stride_b;
  return {memory::desc({count_a, g.m, g.k}, in,
                       g.trans_a ? dims{stride_a, 1, g.lda} : dims{stride_a, g.lda, 1}),
          memory::desc({count_b, g.k, g.n}, in,
                       g.trans_b ? dims{stride_b, 1, g.ldb} : dims{stride_b, g.ldb, 1}),
          memory::desc({batch.count, g.m, g.n}, memory::data_type::f32,
                       dims{g.m * g.ldc, g.ldc, 1})};
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

// The matmul for these layouts. Creations take a lock of ours: oneDNN's
// primitive cache synchronises its threads in ways ThreadSanitizer cannot see (oneDNN is
// not instrumented), and with the lock every creation, and every execution
// of what it made, follows the creations before it in an order it can see.
dnnl::matmul MakeMatmul(const Layouts& l, const dnnl::primitive_attr& attr) {
  static std::mutex creating;
  std::lock_guard<std::mutex> hold(creating);
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(l.a, l.b, l.c), attr,
                                                   Engine()));
}

// This thread's matmuls by call (everything but the pointers): a step's
// GEMMs repeat a few shapes, and a creation, even one oneDNN's own cache
// answers, costs tens of microseconds, as much as a small GEMM. Per thread
// because oneDNN, built as it is by default, runs a primitive only on the
// thread that created it (its scratchpad is shared by that thread's
// primitives). Dropped whole when it holds kMaxCached.
using Key = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       float, float, int64_t, int64_t, int64_t>;
constexpr size_t kMaxCached = 256;

struct Matmul {
  Layouts layouts;
  dnnl::matmul matmul;
};

template <typename T>
const Matmul& CachedMatmul(const GemmOperands<T>& g, float alpha, float beta,
                           const MatmulBatch& batch) {
  thread_local std::map<Key, Matmul> cache;
  const Key key{static_cast<int>(kDataType<T>), g.trans_a, g.trans_b, g.m, g.n, g.k,
                g.lda, g.ldb, g.ldc, alpha, beta, batch.count, batch.stride_a,
                batch.stride_b};
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  if (cache.size() >= kMaxCached) cache.clear();
  const Layouts layouts = batch.count == 1 ? LayoutsOf(g) : BatchedLayoutsOf(g, batch);
  return cache.emplace(key, Matmul{layouts, MakeMatmul(layouts, Scaling(alpha, beta))})
      .first->second;
}

bool IsaIncludes(dnnl::cpu_isa wanted) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bits = static_cast<unsigned>(wanted);
  return (isa & bits) == bits;
}

// oneDNN's OpenMP threads: one for the call in scope (the intra-op
// threads are ours). Debian's oneDNN is the OpenMP build, which takes its
// thread count from the calling thread's OpenMP setting and from nowhere
// else (a stream or an attribute cannot carry it), so the setting is made
// for the call and the caller's own is put back after it.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(before_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  const int before_;
};

template <typename T>
void Run(const GemmOperands<T>& g, float alpha, float beta, const MatmulBatch& batch) {
  const OneOpenMpThread one_thread;
  thread_local dnnl::stream stream(Engine());
  const Matmul& cached = CachedMatmul(g, alpha, beta, batch);
  const Layouts& l = cached.layouts;
  memory a(l.a, Engine(), const_cast<T*>(g.a));
  memory b(l.b, Engine(), const_cast<T*>(g.b));
  memory c(l.c, Engine(), g.c);
  cached.matmul.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  stream.wait();
}

}  // namespace

void OneDnnMatmul(const GemmOperands<float>& g, float alpha, float beta,
                  const MatmulBatch& batch) {
  Run(g, alpha, beta, batch);
}

void OneDnnMatmul(const GemmOperands<uint16_t>& g, float alpha, float beta,
                  const MatmulBatch& batch) {
  Run(g, alpha, beta, batch);
}

bool OneDnnHasAvx512() {
  static const bool has = IsaIncludes(dnnl::cpu_isa::avx512_core);
  return has;
}

bool OneDnnHasAvx512Bf16() {
  static const bool has = IsaIncludes(dnnl::cpu_isa::avx512_core_bf16);
  return has;
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

}  // namespace cpu
}  // namespace tandem
