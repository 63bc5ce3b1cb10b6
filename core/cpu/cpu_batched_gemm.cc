#include "core/cpu/cpu_batched_gemm.h"

#include <algorithm>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/cpu/cpu_gemm_bf16.h"
#include "core/cpu/onednn_matmul.h"
#include "core/cpu/scratch.h"

namespace tandem {
namespace cpu {
namespace {

// Product i of the batch whose first product is g0.
template <typename T>
GemmOperands<T> ProductAt(const GemmOperands<T>& g0, const GemmStrides& s, int64_t i) {
  GemmOperands<T> g = g0;
  g.a += i * s.stride_a;
  g.b += i * s.stride_b;
  g.c += i * g0.m * g0.n;
  return g;
}

// Runs PlanBatch's plan: chunk(first product, count) for each chunk on up to
// `threads` threads, or whole(product) for each product in turn.
template <typename T, typename Chunk, typename Whole>
void RunBatch(ThreadPool& pool, int threads, const GemmOperands<T>& g0, const GemmStrides& s,
              const Chunk& chunk, const Whole& whole) {
  const BatchPlan plan = PlanBatch(s.count, g0.m, g0.n, g0.k, threads);
  if (plan.each_blocked) {
    for (int64_t i = 0; i < s.count; ++i) whole(ProductAt(g0, s, i));
    return;
  }
  auto run = [&](int64_t index) {
    const int64_t begin = index * plan.per_chunk;
    chunk(ProductAt(g0, s, begin), std::min(plan.per_chunk, s.count - begin));
  };
  if (plan.chunks == 1 || threads <= 1) {
    for (int64_t i = 0; i < plan.chunks; ++i) run(i);
    return;
  }
  pool.ParallelFor(plan.chunks, threads, run);
}

MatmulBatch OneDnnBatch(const GemmStrides& s, int64_t count) {
  MatmulBatch batch;
  batch.count = count;
  batch.stride_a = s.stride_a;
  batch.stride_b = s.stride_b;
  return batch;
}

// The elements a batch of `count` matrices of `size` elements spans.
int64_t Extent(int64_t count, int64_t stride, int64_t size) {
  return (stride == 0 ? 0 : (count - 1) * stride) + size;
}

void WidenAll(ThreadPool& pool, int threads, const uint16_t* bits, float* out, int64_t n) {
  IntraOp{&pool, threads}.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    WidenBFloat16(bits + begin, out + begin, end - begin);
  });
}

}  // namespace

BatchPlan PlanBatch(int64_t count, int64_t m, int64_t n, int64_t k, int threads) {
  BatchPlan plan;
  if (count < threads && PlanGemm(m, n, k, threads).count > 1) {
    plan.each_blocked = true;
    plan.chunks = count;
    return plan;
  }
  const double flops = 2.0 * static_cast<double>(m) * n * k * count;
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>({threads, count, static_cast<int64_t>(flops / kMinBlockFlops)}));
  plan.per_chunk = (count + chunks - 1) / chunks;
  plan.chunks = (count + plan.per_chunk - 1) / plan.per_chunk;
  return plan;
}

void BatchedGemm(GemmLibrary library, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
                 int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                 float beta, float* c, const GemmStrides& batch) {
  if (m <= 0 || n <= 0 || batch.count <= 0) return;
  if (k <= 0) return ScaleOnly(batch.count * m, n, beta, c);
  using G = GemmOperands<float>;
  RunBatch(
      pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c), batch,
      [&](const G& g, int64_t count) {
        if (library == GemmLibrary::kOneDnn) {
          return OneDnnMatmul(g, alpha, beta, OneDnnBatch(batch, count));
        }
        for (int64_t i = 0; i < count; ++i) GemmBlock(library, ProductAt(g, batch, i), alpha, beta);
      },
      [&](const G& g) {
        Gemm(library, pool, threads, trans_a, trans_b, m, n, k, alpha, g.a, g.b, beta, g.c);
      });
}

void BatchedGemmBf16(GemmLibrary widened, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
                     int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                     const uint16_t* b, float beta, float* c, const GemmStrides& batch) {
  if (m <= 0 || n <= 0 || batch.count <= 0) return;
  if (k <= 0) return ScaleOnly(batch.count * m, n, beta, c);
  if (!Bf16GemmFast()) {
    // Note [Batched GEMMs on the CPU]: each operand widened once, whole.
    const int64_t size_a = Extent(batch.count, batch.stride_a, m * k);
    const int64_t size_b = Extent(batch.count, batch.stride_b, k * n);
    Scratch wide_a(size_a), wide_b(size_b);
    WidenAll(pool, threads, a, wide_a.data(), size_a);
    WidenAll(pool, threads, b, wide_b.data(), size_b);
    return BatchedGemm(widened, pool, threads, trans_a, trans_b, m, n, k, alpha, wide_a.data(),
                       wide_b.data(), beta, c, batch);
  }
  using G = GemmOperands<uint16_t>;
  RunBatch(
      pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c), batch,
      [&](const G& g, int64_t count) { OneDnnMatmul(g, alpha, beta, OneDnnBatch(batch, count)); },
      [&](const G& g) {
        GemmBf16(widened, pool, threads, trans_a, trans_b, m, n, k, alpha, g.a, g.b, beta, g.c);
      });
}

}  // namespace cpu
}  // namespace tandem
