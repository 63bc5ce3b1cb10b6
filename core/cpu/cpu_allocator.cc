#include "core/cpu/cpu_allocator.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"
#include "core/lane.h"

namespace tandem {
namespace cpu {

void* CpuAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* ptr = std::aligned_alloc(64, rounded);
  TANDEM_CHECK(ptr != nullptr) << "out of host memory allocating " << bytes
                               << " bytes";
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in_use += bytes;
  stats_.bytes_reserved += bytes;
  stats_.system_allocations += 1;
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CpuAllocator::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in_use -= bytes;
  stats_.bytes_reserved -= bytes;
}

void CpuAllocator::FreeAfter(void* ptr, size_t bytes,
                             std::vector<std::unique_ptr<LaneEvent>> after) {
  after.clear();
  Free(ptr, bytes);
}

MemoryStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CpuAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

}  // namespace cpu
}  // namespace tandem
