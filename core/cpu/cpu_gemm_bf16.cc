#include "core/cpu/cpu_gemm_bf16.h"

#include <optional>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/cpu/onednn_matmul.h"
#include "core/cpu/scratch.h"

namespace tandem {
namespace cpu {
namespace {

// The [rows, cols] matrix stored at `bits` with leading dimension `ld`,
// widened densely (leading dimension cols) into `out`.
void WidenMatrix(const uint16_t* bits, int64_t rows, int64_t cols, int64_t ld, float* out) {
  if (ld == cols) return WidenBFloat16(bits, out, rows * cols);
  for (int64_t r = 0; r < rows; ++r) WidenBFloat16(bits + r * ld, out + r * cols, cols);
}

// Note [Widening a block at a time].
void GemmWidened(GemmLibrary library, ThreadPool& pool, int threads,
                 const GemmOperands<uint16_t>& whole, float alpha, float beta) {
  const bool split_b = PlanGemm(whole.m, whole.n, whole.k, threads).by_columns;
  // The operand every block reads whole, widened once (dense, as stored).
  const uint16_t* shared = split_b ? whole.a : whole.b;
  const int64_t shared_size = split_b ? whole.m * whole.k : whole.k * whole.n;
  Scratch shared_wide(shared_size);
  WidenBFloat16(shared, shared_wide.data(), shared_size);
  RunGemmBlocks(pool, threads, whole, [&](const GemmOperands<uint16_t>& g) {
    GemmOperands<float> f{g.trans_a, g.trans_b, g.m, g.n, g.k, nullptr, g.lda,
                          nullptr, g.ldb, g.c, g.ldc};
    std::optional<Scratch> slice;
    // The block's own slice of the split operand, [rows, cols] as stored.
    if (split_b) {
      const int64_t rows = g.trans_b ? g.n : g.k, cols = g.trans_b ? g.k : g.n;
      slice.emplace(rows * cols);
      WidenMatrix(g.b, rows, cols, g.ldb, slice->data());
      f.a = shared_wide.data() + (g.a - whole.a);
      f.b = slice->data();
      f.ldb = cols;
    } else {
      const int64_t rows = g.trans_a ? g.k : g.m, cols = g.trans_a ? g.m : g.k;
      slice.emplace(rows * cols);
      WidenMatrix(g.a, rows, cols, g.lda, slice->data());
      f.a = slice->data();
      f.b = shared_wide.data() + (g.b - whole.b);
      f.lda = cols;
    }
    GemmBlock(library, f, alpha, beta);
  });
}

}  // namespace

bool Bf16GemmFast() { return OneDnnHasAvx512Bf16(); }

std::string DescribeBf16Gemm() {
  if (!Bf16GemmFast()) {
    return std::string("float32 GEMM on widened operands (") + ConversionVectors() +
           " conversions)";
  }
  return OneDnnVersion() + " (AVX-512 BF16)";
}

void GemmBf16(GemmLibrary widened, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
              int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
              const uint16_t* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c);
  const GemmOperands<uint16_t> whole = WholeGemm(trans_a, trans_b, m, n, k, a, b, c);
  if (!Bf16GemmFast()) return GemmWidened(widened, pool, threads, whole, alpha, beta);
  RunGemmBlocks(pool, threads, whole,
                [&](const GemmOperands<uint16_t>& g) { OneDnnMatmul(g, alpha, beta); });
}

}  // namespace cpu
}  // namespace tandem
