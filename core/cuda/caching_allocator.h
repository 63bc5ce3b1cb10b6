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
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

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
// The limit: the argument holds for one stream only. Memory used by another
// stream (a communication stream running an all-reduce, a copy stream) must
// be kept alive by its owner until that stream's work is done: hold the
// Tensor, and release it only after the compute stream has waited for the
// other stream (cuda::StreamWaitFor) or after an event recorded there has
// completed. Otherwise the block can be reallocated and overwritten by the
// compute stream while the other stream still reads it.

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
  // bytes_in_use and peak count whole size classes (what the blocks occupy),
  // bytes_reserved all memory taken from cudaMalloc and not yet returned.
  MemoryStats stats() const override;
  void ResetPeak() override;

  // Returns every cached (free) block to the system. Waits for the device
  // first (cudaDeviceSynchronize): not for a training step's hot path.
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
  // Requires mutex_. cudaFree of every cached block.
  void ReleaseCachedLocked();

  const int device_;
  mutable std::mutex mutex_;
  // size class -> cached blocks of exactly that class (LIFO: the most
  // recently freed block is the likeliest to be warm in L2).
  std::map<size_t, std::vector<void*>> free_blocks_;
  // Every block handed out and not yet freed -> its size class.
  std::unordered_map<void*, size_t> live_blocks_;
  // Every size class ever requested, for ReserveSpares.
  std::map<size_t, bool> classes_seen_;
  MemoryStats stats_;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CACHING_ALLOCATOR_H_
