// Counts the places where the host blocks on the GPU (stream, event and
// device synchronisation), so tests can assert that a training step never
// waits: Tandem's GPU step is meant to be queued, not waited on.
//
//   const int64_t before = cuda::HostWaitCount();
//   RunStep();
//   EXPECT_EQ(cuda::HostWaitCount(), before);
#ifndef TANDEM_CORE_CUDA_HOST_WAIT_H_
#define TANDEM_CORE_CUDA_HOST_WAIT_H_

#include <atomic>
#include <cstdint>

namespace tandem {
namespace cuda {

inline std::atomic<int64_t>& HostWaitCounter() {
  static std::atomic<int64_t> counter{0};
  return counter;
}
// Called by every Tandem wrapper that blocks the host on the GPU.
inline void CountHostWait() { HostWaitCounter().fetch_add(1, std::memory_order_relaxed); }
inline int64_t HostWaitCount() { return HostWaitCounter().load(std::memory_order_relaxed); }

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_HOST_WAIT_H_
