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
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Stream::Reset() {
  // cudaStreamDestroy returns at once; work already queued still completes.
  if (stream_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaStreamDestroy(stream_));
  stream_ = nullptr;
}

}  // namespace cuda
}  // namespace tandem
