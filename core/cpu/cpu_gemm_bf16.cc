#include "core/cpu/cpu_gemm_bf16.h"

#include "core/check.h"
#include "core/cpu/cpu_gemm.h"
#include "core/cpu/onednn_matmul.h"

namespace tandem {
namespace cpu {

bool Bf16GemmFast() { return OneDnnHasAvx512Bf16(); }

std::string DescribeBf16Gemm() {
  if (!Bf16GemmFast()) return "float32 GEMM on widened operands";
  return OneDnnVersion() + " (AVX-512 BF16)";
}

void GemmBf16(ThreadPool& pool, int threads, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, const uint16_t* a, const uint16_t* b, float beta,
              float* c) {
  TANDEM_CHECK(Bf16GemmFast()) << "GemmBf16 needs a CPU with bfloat16 dot products";
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c);
  RunGemmBlocks(pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c),
                [&](const GemmOperands<uint16_t>& g) { OneDnnMatmul(g, alpha, beta); });
}

}  // namespace cpu
}  // namespace tandem
