// Host memory for CPU tensors: 64-byte aligned (a cache line, and what AVX-512
// loads like), with counters for MemoryStats. Thread-safe.
//
// Large blocks are kept for reuse (Note [Host blocks kept for reuse]):
//
//   cpu::CpuAllocator allocator;
//   void* p = allocator.Allocate(1 << 20);   // from the system
//   allocator.Free(p, 1 << 20);              // kept, not freed
//   void* q = allocator.Allocate(1 << 20);   // q == p, no system call
#ifndef TANDEM_CORE_CPU_CPU_ALLOCATOR_H_
#define TANDEM_CORE_CPU_CPU_ALLOCATOR_H_

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/allocator.h"

namespace tandem {
namespace cpu {

// Note [Host blocks kept for reuse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A training step allocates the same activations, gradients and scratch
// every step. The C library hands large blocks back to the system when they
// are freed (munmap, or trimming the heap), so each step would touch fresh
// pages again, one page fault per 4 KiB written first. Blocks of at least
// kMinKeptBytes are therefore kept when freed, on a free list by size, and
// a later request takes the smallest kept block that is at least its size
// and at most a quarter larger. Smaller blocks come from the C library's own
// free lists, which reuse them without the system. What is kept is capped
// (max_kept_bytes): past the cap a freed block goes back to the system.
// Under AddressSanitizer the default keeps nothing, so that a use of a freed
// tensor's memory is still reported rather than hidden by reuse.
class CpuAllocator : public Allocator {
 public:
  static constexpr size_t kMinKeptBytes = 64 * 1024;
#if defined(__SANITIZE_ADDRESS__)
  static constexpr size_t kDefaultMaxKeptBytes = 0;
#else
  static constexpr size_t kDefaultMaxKeptBytes = size_t{2} << 30;
#endif

  explicit CpuAllocator(size_t max_kept_bytes = kDefaultMaxKeptBytes);
  // Returns the kept blocks to the system; blocks still in use are left to
  // their owners (who outlive the allocator only at process exit).
  ~CpuAllocator() override;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  void* Allocate(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
  // Every lane of the CPU runs its work when it is called: nothing is
  // pending, and the memory is freed at once.
  void FreeAfter(void* ptr, size_t bytes,
                 std::vector<std::unique_ptr<LaneEvent>> after) override;
  // bytes_in_use counts what callers asked for; bytes_reserved adds the
  // kept blocks; system_allocations counts calls to the C library for
  // blocks of at least kMinKeptBytes and below it alike.
  MemoryStats stats() const override;
  void ResetPeak() override;
  // Returns every kept block to the system.
  void ReleaseKept();

 private:
  // Caller holds mutex_.
  void* TakeKept(size_t rounded);

  const size_t max_kept_bytes_;
  mutable std::mutex mutex_;
  MemoryStats stats_;
  // Kept blocks by their size (what was taken from the system).
  std::multimap<size_t, void*> kept_;
  size_t kept_bytes_ = 0;
  // The size taken from the system of every block of at least kMinKeptBytes
  // in use, which may exceed what its caller asked for.
  std::unordered_map<void*, size_t> large_in_use_;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_ALLOCATOR_H_
