// Host <-> device copies staged through pinned memory.
//
// Note [Pinned staging]
// ~~~~~~~~~~~~~~~~~~~~~
// Tensor data on the host is ordinary pageable memory. cudaMemcpyAsync from
// pageable memory is not asynchronous, and the caller may reuse or free its
// buffer as soon as CopyHostToDevice returns. So a host-to-device copy first
// memcpy's the data into a pinned staging slot, then queues the DMA from the
// slot on the lane's stream and returns: the caller's buffer is free at
// once, and the transfer overlaps whatever the host does next.
//
// The slot itself must not be overwritten while its DMA may still read it:
// an event is recorded after each staged copy and synchronised before the
// slot is filled again. Two slots alternate, so filling one overlaps the
// DMA out of the other; copies larger than a slot go in slot-sized chunks.
//
// Device-to-host copies mirror this: the DMA goes into a slot, the host waits
// for the event recorded after it (that is, for everything queued on the
// lane so far, but not for work queued later) and copies the slot out, while
// the next chunk's DMA fills the other slot. This wait is the one place a
// copy blocks.
#ifndef TANDEM_CORE_CUDA_STAGING_H_
#define TANDEM_CORE_CUDA_STAGING_H_

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>

#include "core/cuda/event.h"
#include "core/cuda/handles.h"

namespace tandem {
namespace cuda {

// Host <-> device copies are staged through pinned buffers of at most this
// many bytes; larger copies go in chunks of this size.
constexpr size_t kStagingChunkBytes = size_t{8} << 20;

// Two pinned slots used in turn; one set per direction and context, used
// under the owner's lock. See Note [Pinned staging].
class StagingSlots {
 public:
  struct Slot {
    PinnedBuffer buffer;
    Event done;  // recorded after the last DMA that used `buffer`
  };

  // The next slot, free for the host to fill or read: its previous DMA has
  // completed, and its buffer holds at least `bytes`.
  Slot& Next(size_t bytes);

 private:
  std::array<Slot, 2> slots_;
  size_t next_ = 0;
};

// `bytes` from pageable host memory to device memory on `stream`; returns
// once `host` may be reused. `what` names the copy in errors.
void StagedHostToDevice(StagingSlots& slots, cudaStream_t stream,
                        const void* host, void* dst, size_t bytes,
                        const char* what);
// `bytes` from device memory to pageable host memory, after everything
// queued on `stream` so far; returns when the data is on the host.
void StagedDeviceToHost(StagingSlots& slots, cudaStream_t stream,
                        const void* src, void* host, size_t bytes,
                        const char* what);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_STAGING_H_
