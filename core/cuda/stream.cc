#include "core/cuda/stream.h"

#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"

namespace tandem {
namespace cuda {

Stream::Stream(int priority) {
  CUDA_CHECK(
      cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority))
      << "creating a stream with priority " << priority;
}

Stream::~Stream() { Reset(); }

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::Synchronize() const {
  CountHostWait();
  // Polled, not cudaStreamSynchronize: see Note [Abandoned host waits].
  WaitUntilDone(
      [this] {
        const cudaError_t status = cudaStreamQuery(stream_);
        if (status == cudaErrorNotReady) {
          cudaGetLastError();  // not an error: don't leave it for the next check
          return false;
        }
        CUDA_CHECK(status);
        return true;
      },
      "waiting for a GPU stream");
}

void Stream::Reset() {
  // cudaStreamDestroy returns at once; work already queued still completes.
  if (stream_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaStreamDestroy(stream_));
  stream_ = nullptr;
}

}  // namespace cuda
}  // namespace tandem
