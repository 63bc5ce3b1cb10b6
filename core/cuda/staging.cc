#include "core/cuda/staging.h"

#include <algorithm>
#include <cstring>

#include "core/cuda/cuda_check.h"

namespace tandem {
namespace cuda {

StagingSlots::Slot& StagingSlots::Next(size_t bytes) {
  // Grow geometrically from 1 MiB: cudaHostAlloc is slow (it pins pages),
  // so a few early copies settle the size for good.
  constexpr size_t kMinStagingBytes = size_t{1} << 20;
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  slot.done.Synchronize();  // at once if nothing was recorded yet
  if (bytes > slot.buffer.capacity()) {
    const size_t grown = std::max(kMinStagingBytes, 2 * slot.buffer.capacity());
    slot.buffer.Reserve(std::max(bytes, std::min(grown, kStagingChunkBytes)));
  }
  return slot;
}

void StagedHostToDevice(StagingSlots& slots, cudaStream_t stream,
                        const void* host, void* dst, size_t bytes,
                        const char* what) {
  const char* from = static_cast<const char*>(host);
  char* to = static_cast<char*>(dst);
  for (size_t offset = 0; offset < bytes;) {
    const size_t chunk = std::min(bytes - offset, kStagingChunkBytes);
    StagingSlots::Slot& slot = slots.Next(chunk);
    std::memcpy(slot.buffer.data(), from + offset, chunk);
    CUDA_CHECK(cudaMemcpyAsync(to + offset, slot.buffer.data(), chunk,
                               cudaMemcpyHostToDevice, stream))
        << "copying " << chunk << " bytes to " << what;
    slot.done.Record(stream);
    offset += chunk;
  }
}

void StagedDeviceToHost(StagingSlots& slots, cudaStream_t stream,
                        const void* src, void* host, size_t bytes,
                        const char* what) {
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(host);
  // Chunk i goes through slot i % 2; chunk i is read out on the host while
  // chunk i + 1 is in flight.
  size_t pending_offset = 0, pending_bytes = 0;
  StagingSlots::Slot* pending = nullptr;
  for (size_t offset = 0; offset < bytes;) {
    const size_t chunk = std::min(bytes - offset, kStagingChunkBytes);
    StagingSlots::Slot& slot = slots.Next(chunk);
    CUDA_CHECK(cudaMemcpyAsync(slot.buffer.data(), from + offset, chunk,
                               cudaMemcpyDeviceToHost, stream))
        << "copying " << chunk << " bytes from " << what;
    slot.done.Record(stream);
    if (pending != nullptr) {
      pending->done.Synchronize();
      std::memcpy(to + pending_offset, pending->buffer.data(), pending_bytes);
    }
    pending = &slot;
    pending_offset = offset;
    pending_bytes = chunk;
    offset += chunk;
  }
  if (pending == nullptr) return;
  pending->done.Synchronize();
  std::memcpy(to + pending_offset, pending->buffer.data(), pending_bytes);
}

}  // namespace cuda
}  // namespace tandem
