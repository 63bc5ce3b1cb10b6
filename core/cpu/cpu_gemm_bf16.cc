#include "core/cpu/cpu_gemm_bf16.h"

#include <vector>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/cpu/onednn_matmul.h"

namespace tandem {
namespace cpu {
namespace {

// The [rows, cols] matrix stored at `bits` with leading dimension `ld`,
// widened into `out`, densely (leading dimension cols); grows `out` to fit.
const float* WidenMatrix(const uint16_t* bits, int64_t rows, int64_t cols, int64_t ld,
                         std::vector<float>& out) {
  if (static_cast<int64_t>(out.size()) < rows * cols) out.resize(rows * cols);
  if (ld == cols) {
    WidenBFloat16(bits, out.data(), rows * cols);
  } else {
    for (int64_t r = 0; r < rows; ++r) WidenBFloat16(bits + r * ld, out.data() + r * cols, cols);
  }
  return out.data();
}

// A thread's buffers: one for the operand every block shares (held by the
// calling thread for the whole GEMM) and one for the block it runs.
std::vector<float>& SharedBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}
std::vector<float>& BlockBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

// Note [Widening a block at a time].
void GemmWidened(GemmLibrary library, ThreadPool& pool, int threads,
                 const GemmOperands<uint16_t>& whole, float alpha, float beta) {
  const bool split_b = PlanGemm(whole.m, whole.n, whole.k).by_columns;
  // The shared operand whole, as stored ([rows, cols] with its leading dimension).
  const uint16_t* shared = split_b ? whole.a : whole.b;
  const int64_t shared_rows = split_b ? (whole.trans_a ? whole.k : whole.m)
                                      : (whole.trans_b ? whole.n : whole.k);
  const int64_t shared_ld = split_b ? whole.lda : whole.ldb;
  const float* shared_wide = WidenMatrix(shared, shared_rows, shared_ld, shared_ld, SharedBuffer());
  RunGemmBlocks(pool, threads, whole, [&](const GemmOperands<uint16_t>& g) {
    GemmOperands<float> f{g.trans_a, g.trans_b, g.m, g.n, g.k, nullptr, g.lda,
                          nullptr, g.ldb, g.c, g.ldc};
    if (split_b) {
      f.a = shared_wide + (g.a - whole.a);
      const int64_t rows = g.trans_b ? g.n : g.k, cols = g.trans_b ? g.k : g.n;
      f.b = WidenMatrix(g.b, rows, cols, g.ldb, BlockBuffer());
      f.ldb = cols;
    } else {
      f.b = shared_wide + (g.b - whole.b);
      const int64_t rows = g.trans_a ? g.k : g.m, cols = g.trans_a ? g.m : g.k;
      f.a = WidenMatrix(g.a, rows, cols, g.lda, BlockBuffer());
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
