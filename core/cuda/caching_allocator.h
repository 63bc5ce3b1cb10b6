// CachingAllocator: GPU memory for one device's tensors, recycled instead of
// returned, so a steady-state training step makes no cudaMalloc or cudaFree
// (both are slow, and cudaFree synchronises the whole device).
//
// Requests are rounded up to a size class (RoundSize); a freed block goes to
// its class's free list and the next request of that class takes it back.
// The first training step warms the cache; later steps reuse it exactly.
//
//   cuda::CachingAllocator allocator(/*device=*/0);
//   void* p = allocator.Allocate(1000);   // cudaMalloc of RoundSize(1000)
//   allocator.Free(p, 1000);              // cached, not freed
//   void* q = allocator.Allocate(1000);   // q == p, no cudaMalloc
//
// Thread-safe. See Note [Stream-ordered reuse] for when a freed block may be
// handed out again.
#ifndef TANDEM_CORE_CUDA_CACHING_ALLOCATOR_H_
#define TANDEM_CORE_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/pending_frees.h"

namespace tandem {
namespace cuda {

// Note [Stream-ordered reuse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Free() is called on the host, usually while kernels that read or write the
// block are still queued on the GPU. Handing the block to the next Allocate()
// at once is nevertheless safe, because every tensor of a device is used on
// that device's one compute stream: whatever the new owner queues on the
// block is queued on the same stream, after the old owner's work, and a
// stream runs its work in order. The block is thus "freed in stream order",
// and the host never waits for the GPU to reuse memory. This is also why the
// backend may take a scratch buffer, launch a kernel on it and free it in the
// next line.
//
// The argument holds for the main lane only. A tensor that work on another
// lane (the side lane of a layer's weight gradient, a communication stream)
// reads or writes is marked with Tensor::RecordLane: when its last handle
// goes, an event is recorded on each such lane, and FreeAfter keeps the block
// aside (core/pending_frees.h) until every one of them has completed; only
// then does Allocate hand it out again. As with PyTorch's recordStream, the
// host never waits for it, and the owner drops the tensor as soon as it is
// done queueing work on it.

class CachingAllocator : public Allocator {
 public:
  // Blocks come from cudaMalloc on `device` (made current for the call).
  explicit CachingAllocator(int device);
  // Returns cached blocks to the system; blocks still in use are leaked
  // (their owners outlive the allocator only at process exit). Never throws.
  ~CachingAllocator() override;

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // 256-byte aligned (cudaMalloc's alignment); nullptr for 0 bytes. When the
  // device is out of memory, frees the cache and retries once, then throws
  // tandem::Error naming the size and the stats.
  void* Allocate(size_t bytes) override;
  // Caches the block; never throws (it runs in tensor destructors): an
  // unknown pointer is reported on stderr and ignored.
  void Free(void* ptr, size_t bytes) override;
  // See Note [Stream-ordered reuse]. Never throws.
  void FreeAfter(void* ptr, size_t bytes,
                 std::vector<std::unique_ptr<LaneEvent>> after) override;
  // bytes_in_use and peak count whole size classes (what the blocks occupy),
  // bytes_reserved all memory taken from cudaMalloc and not yet returned.
  MemoryStats stats() const override;
  void ResetPeak() override;

  // Returns every cached (free) block, and every block waiting for other
  // lanes, to the system. Waits for the device first
  // (cudaDeviceSynchronize): not for a training step's hot path.
  void EmptyCache();
  // Makes sure every size class handed out so far has at least `spares`
  // free blocks cached, calling cudaMalloc for the missing ones. For CUDA
  // graph capture, which must not call cudaMalloc: a step captured while
  // tensors of an earlier capture are still held needs more blocks of a
  // class than the eager steps before it did.
  void ReserveSpares(int spares);

  // The size class of a request: multiples of 512 bytes up to 1 MiB, then
  // four classes per power of two (1, 1.25, 1.5, 1.75 x 2^k), so at most
  // 25% of a large block is slack and few distinct classes keep reuse high.
  static size_t RoundSize(size_t bytes);

  int device() const { return device_; }

 private:
  // Requires mutex_. Caches the pending blocks whose events have completed
  // (all of them after a device synchronisation: `all`).
  void CollectPendingLocked(bool all);
  // Requires mutex_. Waits for the device, then cudaFree of every cached
  // and pending block.
  void ReleaseCachedLocked();

  const int device_;
  mutable std::mutex mutex_;
  // size class -> cached blocks of exactly that class (LIFO: the most
  // recently freed block is the likeliest to be warm in L2).
  std::map<size_t, std::vector<void*>> free_blocks_;
  // Freed blocks waiting for other lanes, each with its size class.
  PendingFrees pending_;
  // Every block handed out and not yet freed -> its size class.
  std::unordered_map<void*, size_t> live_blocks_;
  // Every size class ever requested, for ReserveSpares.
  std::map<size_t, bool> classes_seen_;
  MemoryStats stats_;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CACHING_ALLOCATOR_H_
