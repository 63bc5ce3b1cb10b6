#include "core/cpu/cpu_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/cpu/onednn_matmul.h"
#include "core/cpu/openblas.h"

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

void OpenBlasBlock(const Block& g, float alpha, float beta) {
  LoadedOpenBlas().sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                         g.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(g.m),
                         static_cast<blasint>(g.n), static_cast<blasint>(g.k), alpha, g.a,
                         static_cast<blasint>(g.lda), g.b, static_cast<blasint>(g.ldb), beta,
                         g.c, static_cast<blasint>(g.ldc));
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

bool OpenBlasKernelsFitThisCpu() {
  const OpenBlas& blas = LoadedOpenBlas();
  if (!blas.loaded()) return false;
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return true;
  // OpenBLAS's kernels older than AVX2, which it falls back to on a CPU it
  // does not know. See Note [OpenBLAS on a CPU it does not know].
  const std::string core = blas.corename();
  for (const char* old : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                          "Katmai", "Coppermine", "Northwood", "Banias", "Opteron",
                          "Barcelona", "Bobcat", "Sandybridge", "Bulldozer", "Piledriver"}) {
    if (core == old) return false;
  }
#endif
  return true;
}

GemmLibrary GemmLibraryFromEnvironment() {
  const char* text = std::getenv("TANDEM_CPU_GEMM");
  if (text == nullptr || *text == '\0') {
    if (OneDnnHasAvx512()) return GemmLibrary::kOneDnn;
    return OpenBlasKernelsFitThisCpu() ? GemmLibrary::kOpenBlas : GemmLibrary::kEigen;
  }
  if (std::strcmp(text, "onednn") == 0) {
    TANDEM_CHECK(OneDnnHasAvx512())
        << "TANDEM_CPU_GEMM=onednn: oneDNN's float32 GEMMs are used on CPUs with AVX-512 "
           "only, and it has none here (or DNNL_MAX_CPU_ISA caps it below AVX512_CORE); "
           "set TANDEM_CPU_GEMM=openblas or eigen, or unset it";
    return GemmLibrary::kOneDnn;
  }
  if (std::strcmp(text, "openblas") == 0) {
    const OpenBlas& blas = LoadedOpenBlas();
    TANDEM_CHECK(blas.loaded()) << "TANDEM_CPU_GEMM=openblas: " << blas.error;
    return GemmLibrary::kOpenBlas;
  }
  TANDEM_CHECK(std::strcmp(text, "eigen") == 0)
      << "TANDEM_CPU_GEMM=" << text
      << " is not a GEMM library: set onednn, openblas or eigen";
  return GemmLibrary::kEigen;
}

std::string Describe(GemmLibrary library) {
  if (library == GemmLibrary::kOneDnn) return OneDnnVersion() + " (AVX-512)";
  const OpenBlas& blas = LoadedOpenBlas();
  if (library == GemmLibrary::kEigen) {
    std::string eigen = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                        std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION);
    if (!blas.loaded()) {
      eigen += "; " + blas.error;
    } else if (!OpenBlasKernelsFitThisCpu()) {
      eigen += std::string("; OpenBLAS chose its ") + blas.corename() +
               " kernels for this CPU: set OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell) to use it";
    }
    return eigen;
  }
  if (!blas.loaded()) return "OpenBLAS, not loaded: " + blas.error;
  std::string version = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  version.erase(0, version.find_first_not_of(' '));
  version.erase(version.find_last_not_of(' ') + 1);
  std::string kernels = std::string(blas.corename()) + " kernels";
  if (!blas.set_coretype.empty()) kernels += ", chosen for this CPU's AVX-512";
  return version + " (" + kernels + ")";
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
  } else if (library == GemmLibrary::kOpenBlas) {
    OpenBlasBlock(g, alpha, beta);
  } else {
    EigenBlock(g, alpha, beta);
  }
}

void Gemm(GemmLibrary library, ThreadPool& pool, int threads, bool trans_a, bool trans_b,
          int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleOnly(m, n, beta, c);
  TANDEM_CHECK(library != GemmLibrary::kOpenBlas || LoadedOpenBlas().loaded())
      << "GEMM on OpenBLAS: " << LoadedOpenBlas().error
      << "; install libopenblas-pthread-dev or set TANDEM_CPU_GEMM=eigen";
  RunGemmBlocks(pool, threads, WholeGemm(trans_a, trans_b, m, n, k, a, b, c),
                [&](const Block& g) { GemmBlock(library, g, alpha, beta); });
}

}  // namespace cpu
}  // namespace tandem
