// Host memory for CPU tensors: 64-byte aligned (a cache line, and what AVX-512
// loads like), with counters for MemoryStats. Thread-safe.
#ifndef TANDEM_CORE_CPU_CPU_ALLOCATOR_H_
#define TANDEM_CORE_CPU_CPU_ALLOCATOR_H_

#include <mutex>

#include "core/allocator.h"

namespace tandem {
namespace cpu {

class CpuAllocator : public Allocator {
 public:
  void* Allocate(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
  // Every lane of the CPU runs its work when it is called: nothing is
  // pending, and the memory is freed at once.
  void FreeAfter(void* ptr, size_t bytes,
                 std::vector<std::unique_ptr<LaneEvent>> after) override;
  MemoryStats stats() const override;
  void ResetPeak() override;

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_ALLOCATOR_H_
