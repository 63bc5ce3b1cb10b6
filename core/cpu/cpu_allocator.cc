#include "core/cpu/cpu_allocator.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"
#include "core/lane.h"

namespace tandem {
namespace cpu {
namespace {

size_t RoundToCacheLine(size_t bytes) { return (bytes + 63) / 64 * 64; }

void* SystemAllocate(size_t rounded, size_t asked) {
  void* ptr = std::aligned_alloc(64, rounded);
  TANDEM_CHECK(ptr != nullptr) << "out of host memory allocating " << asked << " bytes";
  return ptr;
}

}  // namespace

CpuAllocator::CpuAllocator(size_t max_kept_bytes) : max_kept_bytes_(max_kept_bytes) {}

CpuAllocator::~CpuAllocator() { ReleaseKept(); }

void* CpuAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t rounded = RoundToCacheLine(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = rounded >= kMinKeptBytes ? TakeKept(rounded) : nullptr;
  if (ptr == nullptr) {
    ptr = SystemAllocate(rounded, bytes);
    stats_.system_allocations += 1;
    stats_.bytes_reserved += static_cast<int64_t>(rounded);
    if (rounded >= kMinKeptBytes) large_in_use_[ptr] = rounded;
  }
  stats_.bytes_in_use += static_cast<int64_t>(bytes);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

// The smallest kept block of at least `rounded` bytes and at most a quarter
// more, now in use; nullptr if none.
void* CpuAllocator::TakeKept(size_t rounded) {
  auto it = kept_.lower_bound(rounded);
  if (it == kept_.end() || it->first > rounded + rounded / 4) return nullptr;
  void* ptr = it->second;
  large_in_use_[ptr] = it->first;
  kept_bytes_ -= it->first;
  kept_.erase(it);
  return ptr;
}

void CpuAllocator::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in_use -= static_cast<int64_t>(bytes);
  auto large = large_in_use_.find(ptr);
  if (large == large_in_use_.end()) {
    std::free(ptr);
    stats_.bytes_reserved -= static_cast<int64_t>(RoundToCacheLine(bytes));
    return;
  }
  const size_t size = large->second;
  large_in_use_.erase(large);
  if (kept_bytes_ + size <= max_kept_bytes_) {
    kept_.emplace(size, ptr);
    kept_bytes_ += size;
  } else {
    std::free(ptr);
    stats_.bytes_reserved -= static_cast<int64_t>(size);
  }
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

void CpuAllocator::ReleaseKept() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [size, ptr] : kept_) {
    std::free(ptr);
    stats_.bytes_reserved -= static_cast<int64_t>(size);
  }
  kept_.clear();
  kept_bytes_ = 0;
}

}  // namespace cpu
}  // namespace tandem
