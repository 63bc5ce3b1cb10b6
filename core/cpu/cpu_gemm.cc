#include "core/cpu/cpu_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/cpu/onednn_matmul.h"

namespace tandem {
namespace cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMatrixMap = Eigen::Map<const RowMajor, 0, Stride>;
using MatrixMap = Eigen::Map<RowMajor, 0, Stride>;

using Block = GemmOperands<float>;

void EigenBlock(const Block& g, float alpha, float beta) {
  MatrixMap C(g.c, g.m, g.n, Stride(g.ldc));
  ConstMatrixMap A(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, Stride(g.lda));
  ConstMatrixMap B(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, Stride(g.ldb));
  // beta == 0 must overwrite C without reading it (it may hold garbage).
  auto assign = [&](const auto& product) {
    if (beta == 0.f) {
      C.noalias() = alpha * product;
    } else {
      C *= beta;
      C.noalias() += alpha * product;
    }
  };
  if (!g.trans_a && !g.trans_b) assign(A * B);
  else if (g.trans_a && !g.trans_b) assign(A.transpose() * B);
  else if (!g.trans_a && g.trans_b) assign(A * B.transpose());
  else assign(A.transpose() * B.transpose());
}

}  // namespace

void ScaleOnly(int64_t m, int64_t n, float beta, float* c) {
  const int64_t size = m * n;
  if (beta == 0.f) {
    std::fill(c, c + size, 0.f);
  } else {
    for (int64_t i = 0; i < size; ++i) c[i] *= beta;
  }
}

GemmLibrary GemmLibraryFromEnvironment() {
  const char* text = std::getenv("TANDEM_CPU_GEMM");
  if (text == nullptr || *text == '\0') {
    return OneDnnHasAvx512() ? GemmLibrary::kOneDnn : GemmLibrary::kEigen;
  }
  if (std::strcmp(text, "onednn") == 0) {
    TANDEM_CHECK(OneDnnHasAvx512())
        << "TANDEM_CPU_GEMM=onednn: oneDNN's float32 GEMMs are used on CPUs with AVX-512 "
           "only, and it has none here (or DNNL_MAX_CPU_ISA caps it below AVX512_CORE); "
           "set TANDEM_CPU_GEMM=eigen, or unset it";
    return GemmLibrary::kOneDnn;
  }
  TANDEM_CHECK(std::strcmp(text, "eigen") == 0)
      << "TANDEM_CPU_GEMM=" << text
      << " is not a float32 GEMM library of the CPU backend: set onednn (CPUs with AVX-512) "
         "or eigen, or unset it";
  return GemmLibrary::kEigen;
}

std::string Describe(GemmLibrary library) {
  if (library == GemmLibrary::kOneDnn) return OneDnnVersion() + " (AVX-512)";
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
}

GemmPlan PlanGemm(int64_t m, int64_t n, int64_t k, int threads) {
  GemmPlan plan;
  plan.by_columns = n > m;
  const int64_t split = plan.by_columns ? n : m;
  const int64_t other = plan.by_columns ? m : n;
  // One block per thread, each at least kMinBlockWidth wide and
  // kMinBlockFlops large (Note [How many blocks]).
  const double flops = 2.0 * static_cast<double>(other) * k * split;
  const int64_t count = std::max<int64_t>(
      1, std::min<int64_t>({threads, split / kMinBlockWidth,
                            static_cast<int64_t>(flops / kMinBlockFlops)}));
  // Widths a multiple of 16 floats (64 bytes), so blocks start on cache lines
  // when the matrix does.
  plan.width = ((split + count - 1) / count + 15) / 16 * 16;
  plan.count = (split + plan.width - 1) / plan.width;
  return plan;
}

void GemmBlock(GemmLibrary library, const GemmOperands<float>& g, float alpha, float beta) {
  if (library == GemmLibrary::kOneDnn) {
    OneDnnMatmul(g, alpha, beta);
  } else {
    EigenBlock(g, alpha, beta);
  }
}

void Gemm(GemmLibrary library, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
          int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c);
  RunGemmBlocks(pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c),
                [&](const Block& g) { GemmBlock(library, g, alpha, beta); });
}

}  // namespace cpu
}  // namespace tandem
