// Stream: an owned, non-blocking CUDA stream (move-only RAII).
//
// Created with cudaStreamNonBlocking, so it never synchronises with the
// legacy default stream: a stray cudaMemcpy on stream 0 elsewhere in the
// process cannot serialise Tandem's work. A stream belongs to the device that
// was current when it was created; create it under a DeviceGuard.
//
//   cuda::DeviceGuard guard(device);
//   cuda::Stream stream;                       // default priority
//   Kernel<<<grid, block, 0, stream.get()>>>(...);
//   stream.Synchronize();
#ifndef TANDEM_CORE_CUDA_STREAM_H_
#define TANDEM_CORE_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

namespace tandem {
namespace cuda {

class Stream {
 public:
  // priority: lower numbers run first (cudaDeviceGetStreamPriorityRange);
  // 0 is the default. Throws tandem::Error on failure.
  explicit Stream(int priority = 0);
  ~Stream();  // never throws

  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Blocks the host until all work queued so far has run.
  void Synchronize() const;

 private:
  void Reset();

  cudaStream_t stream_ = nullptr;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_STREAM_H_
