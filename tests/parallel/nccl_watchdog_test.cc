// The NCCL communicator's watchdog on one GPU: a collective held back on the
// device (queued behind a kernel that spins until the test lets it go, as
// if a peer had stalled) is given up after the timeout; the host waits of
// the step end with an error naming the collective instead of blocking, and
// later collectives fail at once. The GPU tests skip, saying why, where no
// GPU is visible. The watchdog's own rules: device_collective_watchdog_test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "parallel/communicator.h"
#include "parallel/nccl_communicator.h"
#include "parallel/nccl_thread_group.h"
#include "tests/support/device_stall.h"
#include "tests/support/error_text.h"
#include "tests/support/rank_values.h"
#include "tests/support/sanitizer.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ErrorText;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(NcclWatchdogTest, AStalledCollectiveIsAbortedAndTheHostWaitEnds) {
  SKIP_UNLESS_GPUS(1);
  const Device gpu = Device::Cuda(0);
  Backend& backend = GetBackend(gpu);
  NcclThreadGroup group({0});
  NcclCommunicator& comm = group.communicator(0);
  comm.set_timeout(std::chrono::milliseconds(1000));
  Tensor bucket = Tensor::Full({1024}, 1.f, gpu);
  Tensor loss = Tensor::Zeros({1}, gpu);
  std::string host_wait_error;
  double waited = 0.0;
  {
    testing::DeviceStall stall(gpu);
    stall.Hold(backend.main_lane());  // the step's compute stalls
    CollectiveOptions options;
    options.label = "gradient bucket 3";
    std::shared_ptr<Work> work =
        comm.AllReduce(bucket.data(), bucket.numel(), ReduceOp::kSum, options);
    work->WaitOn(backend.main_lane());
    ops::Fill(loss, 2.f);
    const Clock::time_point start = Clock::now();
    host_wait_error = ErrorText([&] { (void)loss.Item(); });  // the step's read of its loss
    waited = SecondsSince(start);
    EXPECT_TRUE(comm.aborted());
    // Later collectives, and waits on the aborted one, fail at once.
    const std::string next = ErrorText([&] {
      comm.AllReduce(bucket.data(), bucket.numel(), ReduceOp::kSum)->Wait();
    });
    EXPECT_EQ(next.find("collective aborted: "), 0u) << next;
    EXPECT_THROW(work->Wait(), CollectiveAbortedError);
    stall.Release();  // the device runs on; its waits are not abandoned here
  }
  std::printf("the host wait ended %.3f s after it began (timeout 1 s)\n", waited);
  EXPECT_GE(waited, 1.0);
  // compute-sanitizer slows every CUDA call: a looser bound there.
  EXPECT_LT(waited, testing::UnderSanitizer() ? 30.0 : 3.0)
      << "the host wait did not end soon after the timeout";
  EXPECT_NE(host_wait_error.find("abandoned: NcclCommunicator(rank 0 of 1, cuda:0"),
            std::string::npos)
      << host_wait_error;
  EXPECT_NE(host_wait_error.find("AllReduce #1 (4096 bytes, sum, gradient bucket 3) did not "
                                 "complete within 1000 ms on the device"),
            std::string::npos)
      << host_wait_error;
  EXPECT_EQ(cuda::HostWaitsAbandonedReason().find("NcclCommunicator(rank 0 of 1"), 0u);
  cuda::ResumeHostWaits();
  EXPECT_EQ(loss.Item(), 2.f) << "the device did not run on after the release";
}

// Collectives that complete, however long the process then sits idle, are
// never given up on.
TEST(NcclWatchdogTest, CompletedCollectivesAreLeftAlone) {
  SKIP_UNLESS_GPUS(1);
  const Device gpu = Device::Cuda(0);
  NcclThreadGroup group({0});
  NcclCommunicator& comm = group.communicator(0);
  comm.set_timeout(std::chrono::milliseconds(200));
  Tensor bucket = Tensor::Full({4096}, 1.f, gpu);
  for (int i = 0; i < 200; ++i) {
    comm.AllReduce(bucket.data(), bucket.numel(), ReduceOp::kSum)->WaitOn(
        GetBackend(gpu).main_lane());
  }
  EXPECT_EQ(testing::FirstN(bucket, 1)[0], 1.f);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(comm.aborted());
  EXPECT_EQ(cuda::HostWaitsAbandonedReason(), "");
  comm.AllReduce(bucket.data(), bucket.numel(), ReduceOp::kSum)->Wait();
}

// A communicator aborted from elsewhere (the launcher, after another worker
// failed) is not the watchdog's to give up on: host waits stay as they are.
TEST(NcclWatchdogTest, AnAbortFromElsewhereLeavesHostWaitsAlone) {
  SKIP_UNLESS_GPUS(1);
  const Device gpu = Device::Cuda(0);
  NcclThreadGroup group({0});
  NcclCommunicator& comm = group.communicator(0);
  comm.set_timeout(std::chrono::milliseconds(200));
  Tensor bucket = Tensor::Full({1024}, 1.f, gpu);
  std::shared_ptr<Work> work = comm.AllReduce(bucket.data(), bucket.numel(), ReduceOp::kSum);
  comm.Abort("worker 1 failed");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(cuda::HostWaitsAbandonedReason(), "");
  EXPECT_THROW(work->Wait(), CollectiveAbortedError);
}

}  // namespace
}  // namespace tandem
