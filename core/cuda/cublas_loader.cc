// cuBLAS and cuBLASLt, loaded when the CUDA backend first calls them.
//
// Note [cuBLAS loaded on first use]
// libcublasLt is a 540 MB library, and mapping and relocating it at start
// made every program that linked it slow to start, CPU-only runs and usage
// errors included. So nothing links it: this file defines the cuBLAS and
// cuBLASLt functions Tandem calls, with the headers' own declarations, and
// each forwards to the library's function, found by dlopen and dlsym on the
// first call of any of them. A program that never
// makes a CUDA context never loads them; one that does pays the load once,
// when its first cuBLAS handle is made.
//
// The libraries are looked for as the dynamic loader would
// (LD_LIBRARY_PATH, then the program's run path), then in the CUDA toolkit
// the build found (TANDEM_CUDA_LIB_DIR). A library that cannot be loaded, or
// lacks a function, throws tandem::Error naming it.
//
// A new cuBLAS call needs one TANDEM_CUBLAS_FORWARD line below; a call with
// none fails to link (undefined reference), never at run time.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/check.h"
#include "local_cuda/config.h"

namespace tandem {
namespace cuda {
namespace {

void* Open(const std::string& name) {
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
  const std::string first_error = dlerror();
  const std::string in_toolkit = std::string(TANDEM_CUDA_LIB_DIR) + "/" + name;
  handle = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  TANDEM_CHECK(handle != nullptr)
      << "cannot load " << name << " (" << first_error << "; nor " << in_toolkit
      << "): the CUDA backend needs cuBLAS " << CUBLAS_VER_MAJOR
      << "; put the folder that holds it on LD_LIBRARY_PATH";
  return handle;
}

std::string Soname(const char* stem) {
  return std::string(stem) + ".so." + std::to_string(CUBLAS_VER_MAJOR);
}

// Each loaded once. cuBLASLt first, on its own: libcublas needs it, and
// should its calls into cuBLASLt bind to the functions below (this file
// built as a shared library exports them), they find it loaded already.
void* Lt() {
  static void* const library = Open(Soname("libcublasLt"));
  return library;
}

void* Blas() {
  static void* const library = (Lt(), Open(Soname("libcublas")));
  return library;
}

void* Symbol(void* library, const char* name) {
  dlerror();
  void* symbol = dlsym(library, name);
  TANDEM_CHECK(symbol != nullptr) << "the loaded cuBLAS has no " << name << " ("
                                  << dlerror() << ")";
  return symbol;
}

}  // namespace
}  // namespace cuda
}  // namespace tandem

// Defines NAME (already declared by the headers) to call the library's NAME.
// LIBRARY is Blas or Lt; PARAMS and ARGS are the parenthesized parameter and
// argument lists.
#define TANDEM_CUBLAS_FORWARD(LIBRARY, RETURN, NAME, PARAMS, ARGS)             \
  extern "C" RETURN CUBLASWINAPI NAME PARAMS {                                 \
    using Function = RETURN(CUBLASWINAPI*) PARAMS;                             \
    static const Function function = reinterpret_cast<Function>(             \
        ::tandem::cuda::Symbol(::tandem::cuda::LIBRARY(), #NAME));           \
    return function ARGS;                                                      \
  }

// cuBLAS (cublas_v2.h renames several to their _v2 symbols).
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasGetProperty,
                      (libraryPropertyType type, int* value), (type, value))
TANDEM_CUBLAS_FORWARD(Blas, const char*, cublasGetStatusName, (cublasStatus_t status), (status))
TANDEM_CUBLAS_FORWARD(Blas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSetStream_v2,
                      (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSetWorkspace_v2,
                      (cublasHandle_t handle, void* workspace, size_t bytes),
                      (handle, workspace, bytes))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSetMathMode,
                      (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSetPointerMode_v2,
                      (cublasHandle_t handle, cublasPointerMode_t mode), (handle, mode))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSetSmCountTarget,
                      (cublasHandle_t handle, int sm_count_target), (handle, sm_count_target))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSgemm_v2,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                       int m, int n, int k, const float* alpha, const float* A, int lda,
                       const float* B, int ldb, const float* beta, float* C, int ldc),
                      (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasSgemm_v2_64,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                       int64_t m, int64_t n, int64_t k, const float* alpha, const float* A,
                       int64_t lda, const float* B, int64_t ldb, const float* beta, float* C,
                       int64_t ldc),
                      (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasGemmEx_64,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                       int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                       cudaDataType Atype, int64_t lda, const void* B, cudaDataType Btype,
                       int64_t ldb, const void* beta, void* C, cudaDataType Ctype, int64_t ldc,
                       cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
                       beta, C, Ctype, ldc, computeType, algo))
TANDEM_CUBLAS_FORWARD(Blas, cublasStatus_t, cublasGemmStridedBatchedEx_64,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                       int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                       cudaDataType Atype, int64_t lda, long long int strideA, const void* B,
                       cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta,
                       void* C, cudaDataType Ctype, int64_t ldc, long long int strideC,
                       int64_t batchCount, cublasComputeType_t computeType,
                       cublasGemmAlgo_t algo),
                      (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
                       ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType,
                       algo))

// cuBLASLt.
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmul,
                      (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                       const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                       cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                       cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                       const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream),
                      (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                       workspace, workspace_bytes, stream))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulDescCreate,
                      (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute_type,
                       cudaDataType_t scale_type),
                      (desc, compute_type, scale_type))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc),
                      (desc))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
                      (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                       const void* buf, size_t bytes),
                      (desc, attr, buf, bytes))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulPreferenceCreate,
                      (cublasLtMatmulPreference_t * pref), (pref))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                      (cublasLtMatmulPreference_t pref), (pref))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                      (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                       const void* buf, size_t bytes),
                      (pref, attr, buf, bytes))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatrixLayoutCreate,
                      (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
                       uint64_t cols, int64_t ld),
                      (layout, type, rows, cols, ld))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatrixLayoutDestroy,
                      (cublasLtMatrixLayout_t layout), (layout))
TANDEM_CUBLAS_FORWARD(Lt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                      (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                       cublasLtMatmulPreference_t preference, int requested,
                       cublasLtMatmulHeuristicResult_t results[], int* returned),
                      (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference, requested, results,
                       returned))
