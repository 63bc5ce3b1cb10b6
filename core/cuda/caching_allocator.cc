#include "core/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"
#include "core/cuda/device_guard.h"
#include "core/lane.h"

namespace tandem {
namespace cuda {
namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // 1 MiB
constexpr size_t kSmallStep = 512;

std::string DescribeStats(const MemoryStats& s) {
  return "in use " + std::to_string(s.bytes_in_use) + " bytes, reserved " +
         std::to_string(s.bytes_reserved) + " bytes, peak " +
         std::to_string(s.peak_bytes_in_use) + " bytes, " +
         std::to_string(s.system_allocations) + " cudaMalloc calls";
}

}  // namespace

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes <= kSmallLimit) {
    return std::max<size_t>(kSmallStep,
                            (bytes + kSmallStep - 1) / kSmallStep * kSmallStep);
  }
  // Four classes per power of two: the step is a quarter of the largest
  // power of two not above `bytes`.
  int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes));
  const size_t step = size_t{1} << (log2 - 2);
  return (bytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(int device) : device_(device) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
  if (!live_blocks_.empty()) {
    std::fprintf(stderr,
                 "tandem: cuda:%d allocator destroyed with %zu blocks in use; "
                 "leaking them\n",
                 device_, live_blocks_.size());
  }
}

void* CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  TANDEM_CHECK(bytes <= (size_t{1} << 50))
      << "cuda:" << device_ << ": cannot allocate " << bytes << " bytes";
  const size_t size = RoundSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);

  if (!pending_.empty()) CollectPendingLocked(/*all=*/false);
  void* ptr = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    // See Note [Stream-ordered reuse].
    ptr = cached->second.back();
    cached->second.pop_back();
  } else {
    DeviceGuard guard(device_);
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      // Out of memory is not sticky, but it is the "last error": clear it so
      // the next launch check does not report it. Then give the cache back
      // (outside the steady state, so the device-wide sync is acceptable)
      // and try once more.
      cudaGetLastError();
      ReleaseCachedLocked();
      status = cudaMalloc(&ptr, size);
      if (status == cudaErrorMemoryAllocation) cudaGetLastError();
    }
    const bool oom = status == cudaErrorMemoryAllocation;
    CUDA_CHECK(status) << "cuda:" << device_ << ": cannot allocate " << bytes
                       << " bytes (size class " << size << ")"
                       << (oom ? " even after freeing the cache" : "") << "; "
                       << DescribeStats(stats_)
                       << (oom ? ". Use a smaller batch or model" : "");
    stats_.system_allocations += 1;
    stats_.bytes_reserved += static_cast<int64_t>(size);
  }
  live_blocks_.emplace(ptr, size);
  classes_seen_[size] = true;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  stats_.peak_bytes_in_use =
      std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(ptr);
  if (live == live_blocks_.end()) {
    std::fprintf(stderr,
                 "tandem: cuda:%d allocator asked to free %p (%zu bytes), "
                 "which it did not hand out; ignoring it\n",
                 device_, ptr, bytes);
    return;
  }
  const size_t size = live->second;
  if (RoundSize(bytes) != size) {
    std::fprintf(stderr,
                 "tandem: cuda:%d block %p freed with %zu bytes but allocated "
                 "in size class %zu; caching it in its own class\n",
                 device_, ptr, bytes, size);
  }
  live_blocks_.erase(live);
  free_blocks_[size].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
}

// A pending block still counts as in use: its memory is not free until the
// other lanes are done with it.
void CachingAllocator::FreeAfter(void* ptr, size_t bytes,
                                 std::vector<std::unique_ptr<LaneEvent>> after) {
  if (ptr == nullptr) return;
  if (after.empty()) return Free(ptr, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(ptr);
  if (live == live_blocks_.end()) {
    std::fprintf(stderr,
                 "tandem: cuda:%d allocator asked to free %p (%zu bytes) after other "
                 "lanes, but it did not hand it out; ignoring it\n",
                 device_, ptr, bytes);
    return;
  }
  const size_t size = live->second;
  live_blocks_.erase(live);
  pending_.Add(ptr, size, std::move(after));
}

void CachingAllocator::CollectPendingLocked(bool all) {
  pending_.Collect(all, [this](void* ptr, size_t size) {
    free_blocks_[size].push_back(ptr);
    stats_.bytes_in_use -= static_cast<int64_t>(size);
  });
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCachedLocked();
}

void CachingAllocator::ReserveSpares(int spares) {
  TANDEM_CHECK(spares >= 0) << "cuda:" << device_ << ": ReserveSpares(" << spares << ")";
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceGuard guard(device_);
  for (const auto& entry : classes_seen_) {
    const size_t size = entry.first;
    std::vector<void*>& free_list = free_blocks_[size];
    while (free_list.size() < static_cast<size_t>(spares)) {
      void* ptr = nullptr;
      CUDA_CHECK(cudaMalloc(&ptr, size))
          << "cuda:" << device_ << ": reserving spare blocks of size class " << size << "; "
          << DescribeStats(stats_);
      stats_.system_allocations += 1;
      stats_.bytes_reserved += static_cast<int64_t>(size);
      free_list.push_back(ptr);
    }
  }
}

void CachingAllocator::ReleaseCachedLocked() {
  bool any = !pending_.empty();
  for (const auto& entry : free_blocks_) any = any || !entry.second.empty();
  if (!any) return;
  // Raw calls, logged rather than thrown: this also runs in the destructor.
  int previous = -1;
  TANDEM_CUDA_LOG_IF_ERROR(cudaGetDevice(&previous));
  if (previous != device_) TANDEM_CUDA_LOG_IF_ERROR(cudaSetDevice(device_));
  // A cached block may still be in use by queued work (see Note
  // [Stream-ordered reuse]): wait for all of it before cudaFree.
  CountHostWait();
  TANDEM_CUDA_LOG_IF_ERROR(cudaDeviceSynchronize());
  CollectPendingLocked(/*all=*/true);
  for (auto& entry : free_blocks_) {
    for (void* block : entry.second) {
      TANDEM_CUDA_LOG_IF_ERROR(cudaFree(block));
      stats_.bytes_reserved -= static_cast<int64_t>(entry.first);
    }
  }
  free_blocks_.clear();
  if (previous >= 0 && previous != device_) {
    TANDEM_CUDA_LOG_IF_ERROR(cudaSetDevice(previous));
  }
}

}  // namespace cuda
}  // namespace tandem
