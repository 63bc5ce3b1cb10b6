// The places where the host blocks on the GPU (stream, event and device
// synchronisation): counted, so tests can assert that a training step never
// waits (Tandem's GPU step is meant to be queued, not waited on); and
// abandonable, so that nothing blocks forever once the process has given
// up on its collectives.
//
//   const int64_t before = cuda::HostWaitCount();
//   RunStep();
//   EXPECT_EQ(cuda::HostWaitCount(), before);
//
// Note [Abandoned host waits]: a GPU step can hang on the device (a peer
// that stalls leaves this rank's collective kernel waiting, and work queued
// behind it with it). ncclCommAbort frees NCCL's own kernels, but a host
// thread blocked in cudaStreamSynchronize on anything else queued behind
// them would stay blocked. So a host wait polls its stream or event, and
// once AbandonHostWaits(reason) has been called (by a communicator's
// watchdog that aborted, parallel/nccl_watchdog.h) a wait that finds the GPU
// not done throws tandem::Error(reason) instead of waiting on. Waits on work
// that is done still return, so a process can clean up. This is process-wide
// on purpose: a process whose collectives were aborted is ending.
#ifndef TANDEM_CORE_CUDA_HOST_WAIT_H_
#define TANDEM_CORE_CUDA_HOST_WAIT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace tandem {
namespace cuda {

inline std::atomic<int64_t>& HostWaitCounter() {
  static std::atomic<int64_t> counter{0};
  return counter;
}
// Called by every Tandem wrapper that blocks the host on the GPU.
inline void CountHostWait() { HostWaitCounter().fetch_add(1, std::memory_order_relaxed); }
inline int64_t HostWaitCount() { return HostWaitCounter().load(std::memory_order_relaxed); }

// Blocks until done() is true (polling: a spin, then short sleeps). Throws
// tandem::Error naming `what` and the reason once host waits are abandoned
// and done() is still false. See Note [Abandoned host waits].
void WaitUntilDone(const std::function<bool()>& done, const char* what);

// From now on, host waits on unfinished GPU work throw Error(reason). The
// first reason is kept; any thread, any number of times.
void AbandonHostWaits(const std::string& reason);
// The reason host waits were abandoned, "" while they are not.
std::string HostWaitsAbandonedReason();
// Waits block again (tests that abandon them on purpose, then go on).
void ResumeHostWaits();

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_HOST_WAIT_H_
