// CUDA_CHECK and CUBLAS_CHECK: the CUDA members of Tandem's check family
// (core/check.h). A failed call throws tandem::Error whose text carries the
// caller's context, the library's error name and string, the failing call and
// file:line:
//
//   CUDA_CHECK(cudaMalloc(&p, bytes)) << "allocating " << bytes << " bytes";
//   // -> "allocating 1024 bytes: CUDA error cudaErrorMemoryAllocation (out
//   //     of memory) [cudaMalloc(&p, bytes) at core/cuda/x.cc:12]"
//   CUBLAS_CHECK(cublasSgemm(...));
//   MyKernel<<<grid, block, 0, stream>>>(...);
//   TANDEM_CUDA_CHECK_LAUNCH() << "MyKernel";
//
// Never use these in a destructor: release with the raw call there and at
// most log (see TANDEM_CUDA_LOG_IF_ERROR).
#ifndef TANDEM_CORE_CUDA_CUDA_CHECK_H_
#define TANDEM_CORE_CUDA_CUDA_CHECK_H_

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "core/check.h"

namespace tandem {
namespace cuda {
namespace internal {

inline bool CudaOk(cudaError_t status) { return status == cudaSuccess; }
inline std::string CudaErrorText(cudaError_t status) {
  // A failed runtime call also becomes the thread's "last error", which the
  // next launch check would report as its own; we have reported it here, so
  // clear it (a no-op for sticky errors, which corrupt the context anyway).
  cudaGetLastError();
  return std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
         cudaGetErrorString(status) + ")";
}

inline bool CublasOk(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS;
}
inline std::string CublasErrorText(cublasStatus_t status) {
  return std::string("cuBLAS error ") + cublasGetStatusName(status) + " (" +
         cublasGetStatusString(status) + ")";
}

// For destructors and other places that must not throw. A context destroyed
// at process exit may find the CUDA runtime already unloaded, which frees
// everything anyway: that is not worth a line.
inline void LogIfError(cudaError_t status, const char* expression,
                       const char* file, int line) {
  if (status == cudaErrorCudartUnloading) {
    cudaGetLastError();
    return;
  }
  if (status != cudaSuccess) {
    cudaGetLastError();  // as in CudaErrorText
    std::fprintf(stderr, "tandem: ignoring %s in %s at %s:%d\n",
                 CudaErrorText(status).c_str(), expression, file, line);
  }
}

}  // namespace internal
}  // namespace cuda
}  // namespace tandem

#define CUDA_CHECK(call, ...)                                             \
  TANDEM_CHECK_GEN(cudaError_t, (call), ::tandem::cuda::internal::CudaOk, \
                   ::tandem::cuda::internal::CudaErrorText, #call,        \
                   ##__VA_ARGS__)

#define CUBLAS_CHECK(call, ...)                                                \
  TANDEM_CHECK_GEN(cublasStatus_t, (call), ::tandem::cuda::internal::CublasOk, \
                   ::tandem::cuda::internal::CublasErrorText, #call,           \
                   ##__VA_ARGS__)

// After every kernel launch: a bad launch configuration (or an earlier
// asynchronous fault) surfaces here, at the launch that the reader can see,
// rather than at some later unrelated call. Streams `<< "KernelName"`.
// (No parameters: a macro whose only parameter is `...` keeps the comma
// before an empty ##__VA_ARGS__ under -std=c++17.)
#define TANDEM_CUDA_CHECK_LAUNCH()                          \
  TANDEM_CHECK_GEN(cudaError_t, cudaGetLastError(),         \
                   ::tandem::cuda::internal::CudaOk,        \
                   ::tandem::cuda::internal::CudaErrorText, \
                   "kernel launch (cudaGetLastError())")

// Logs (never throws) a failed call; for destructors.
#define TANDEM_CUDA_LOG_IF_ERROR(call) \
  ::tandem::cuda::internal::LogIfError((call), #call, __FILE__, __LINE__)

#endif  // TANDEM_CORE_CUDA_CUDA_CHECK_H_
