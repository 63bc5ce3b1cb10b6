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
  MemoryStats stats() const override;
  void ResetPeak() override;

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_ALLOCATOR_H_
