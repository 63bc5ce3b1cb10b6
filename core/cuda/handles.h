// Owned CUDA and cuBLAS resources of a device context (move-free RAII):
// a cuBLAS handle, device memory outside the caching allocator, page-locked
// host memory, and per-op scratch memory from the allocator. Destructors
// release with the raw call and only log.
#ifndef TANDEM_CORE_CUDA_HANDLES_H_
#define TANDEM_CORE_CUDA_HANDLES_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/allocator.h"

namespace tandem {
namespace cuda {

class CublasHandle {
 public:
  CublasHandle();  // on the current device
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Device memory that lives as long as its owner (a cuBLAS workspace), kept
// out of the caching allocator and so out of the tensors' memory stats.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);  // cudaMalloc on the current device
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// Page-locked host memory: the GPU's copy engines read and write it directly,
// so cudaMemcpyAsync from or to it is truly asynchronous.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Grows (discarding the contents) to at least `bytes`. The caller must
  // know that no queued copy still uses the old buffer.
  void Reserve(size_t bytes);
  char* data() const { return static_cast<char*>(data_); }
  size_t capacity() const { return capacity_; }

 private:
  void Release();

  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Scratch device memory for one op, from the context's allocator, freed as
// soon as the op is queued: safe on the main lane only (Note [Stream-ordered
// reuse] in core/cuda/caching_allocator.h).
class Scratch {
 public:
  Scratch(Allocator& allocator, size_t bytes)
      : allocator_(allocator), bytes_(bytes), data_(allocator.Allocate(bytes)) {}
  ~Scratch() { allocator_.Free(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  void* data() const { return data_; }

 private:
  Allocator& allocator_;
  size_t bytes_;
  void* data_;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_HANDLES_H_
