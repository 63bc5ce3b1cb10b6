#include "core/cuda/handles.h"

#include <cstdio>

#include "core/cuda/cuda_check.h"

namespace tandem {
namespace cuda {

CublasHandle::CublasHandle() { CUBLAS_CHECK(cublasCreate(&handle_)); }

CublasHandle::~CublasHandle() {
  const cublasStatus_t status = cublasDestroy(handle_);
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "tandem: ignoring %s in cublasDestroy\n",
                 internal::CublasErrorText(status).c_str());
  }
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  CUDA_CHECK(cudaMalloc(&data_, bytes)) << "allocating " << bytes << " bytes";
}

DeviceBuffer::~DeviceBuffer() { TANDEM_CUDA_LOG_IF_ERROR(cudaFree(data_)); }

void PinnedBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  Release();
  CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable))
      << "allocating " << bytes << " bytes of pinned host memory";
  capacity_ = bytes;
}

void PinnedBuffer::Release() {
  if (data_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaFreeHost(data_));
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace cuda
}  // namespace tandem
