// Stream, Event, StreamWaitFor and DeviceGuard (core/cuda/{stream,event,
// device_guard}.h).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/event.h"
#include "core/cuda/kernels.h"
#include "core/cuda/stream.h"
#include "tests/core/cuda/cuda_test.h"

namespace tandem {
namespace cuda {
namespace {

using ::tandem::testing::CudaTest;

// Without a device, making one current fails with a tandem::Error that says
// why, rather than crashing.
TEST(DeviceGuardNoGpuTest, ThrowsForMissingDevice) {
  if (DeviceCount() > 0) GTEST_SKIP() << "only meaningful without a GPU";
  EXPECT_THROW(DeviceGuard guard(0), Error);
}

class StreamEventTest : public CudaTest {};

TEST_F(StreamEventTest, StreamIsNonBlockingAndMoveOnly) {
  DeviceGuard guard(0);
  Stream a;
  unsigned flags = 0;
  CUDA_CHECK(cudaStreamGetFlags(a.get(), &flags));
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  EXPECT_NE(a.get(), nullptr);  // never the legacy default stream

  cudaStream_t raw = a.get();
  Stream b(std::move(a));
  EXPECT_EQ(b.get(), raw);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  Stream c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  c.Synchronize();
}

// A fill queued on stream A, then a copy of the same buffer on stream B after
// StreamWaitFor(B, A): the copy sees the filled data. The fills are large and
// repeated so that, without the wait, B would very likely copy early.
TEST_F(StreamEventTest, StreamWaitForOrdersBAfterA) {
  DeviceGuard guard(0);
  Stream a, b;
  Event scratch;
  const int64_t n = int64_t{1} << 26;  // 256 MiB
  float* data = nullptr;
  float* host = nullptr;
  CUDA_CHECK(cudaMalloc(&data, n * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&host, n * sizeof(float)));
  kernels::Fill(b.get(), -1.f, data, n);
  b.Synchronize();

  for (int round = 1; round <= 3; ++round) {
    for (int repeat = 0; repeat < 8; ++repeat) {
      kernels::Fill(a.get(), repeat < 7 ? 0.f : static_cast<float>(round), data,
                    n);
    }
    StreamWaitFor(b.get(), a.get(), scratch);
    CUDA_CHECK(cudaMemcpyAsync(host, data, n * sizeof(float),
                               cudaMemcpyDeviceToHost, b.get()));
    b.Synchronize();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i += 997) wrong += host[i] != round;
    EXPECT_EQ(host[n - 1], static_cast<float>(round));
    EXPECT_EQ(wrong, 0) << "round " << round;
    // A's work may be done, but B did not wait for anything queued later.
  }
  a.Synchronize();
  CUDA_CHECK(cudaFreeHost(host));
  CUDA_CHECK(cudaFree(data));
}

TEST_F(StreamEventTest, EventRecordQuerySynchronize) {
  DeviceGuard guard(0);
  Stream s;
  Event e;
  EXPECT_TRUE(e.Query());  // nothing recorded yet
  float* data = nullptr;
  CUDA_CHECK(cudaMalloc(&data, sizeof(float) << 20));
  kernels::Fill(s.get(), 1.f, data, 1 << 20);
  e.Record(s.get());
  e.Synchronize();
  EXPECT_TRUE(e.Query());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  CUDA_CHECK(cudaFree(data));

  Event moved(std::move(e));
  EXPECT_NE(moved.get(), nullptr);
  EXPECT_EQ(e.get(), nullptr);  // NOLINT(bugprone-use-after-move)
}

TEST_F(StreamEventTest, TimingEvents) {
  DeviceGuard guard(0);
  Stream s;
  Event start = Event::Timing();
  Event stop = Event::Timing();
  float* data = nullptr;
  CUDA_CHECK(cudaMalloc(&data, sizeof(float) << 24));
  start.Record(s.get());
  kernels::Fill(s.get(), 2.f, data, 1 << 24);
  stop.Record(s.get());
  EXPECT_GE(stop.ElapsedMsSince(start), 0.f);
  CUDA_CHECK(cudaFree(data));

  // Ordering events cannot be timed, and say so.
  Event a, b;
  a.Record(s.get());
  b.Record(s.get());
  EXPECT_THROW(b.ElapsedMsSince(a), Error);
}

TEST_F(StreamEventTest, DeviceGuardRestoresPreviousDevice) {
  const int last = DeviceCount() - 1;
  CUDA_CHECK(cudaSetDevice(0));
  {
    DeviceGuard guard(last);
    int current = -1;
    CUDA_CHECK(cudaGetDevice(&current));
    EXPECT_EQ(current, last);
  }
  int current = -1;
  CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(current, 0);
  EXPECT_THROW(DeviceGuard guard(DeviceCount()), Error);
  CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(current, 0);
}

// Two GPUs: a stream on GPU 1 waits for GPU 0's stream.
TEST_F(StreamEventTest, StreamWaitForAcrossDevices) {
  if (DeviceCount() < 2)
    GTEST_SKIP() << "needs 2 GPUs, found " << DeviceCount();
  const int64_t n = int64_t{1} << 24;
  float* on0 = nullptr;
  float* on1 = nullptr;
  std::vector<float> host(n);
  {
    DeviceGuard guard(0);
    CUDA_CHECK(cudaMalloc(&on0, n * sizeof(float)));
  }
  DeviceGuard guard1(1);
  CUDA_CHECK(cudaMalloc(&on1, n * sizeof(float)));
  Stream s1;
  Stream s0 = [] {
    DeviceGuard g(0);
    return Stream();
  }();
  Event scratch = [] {
    DeviceGuard g(0);
    return Event();
  }();
  {
    DeviceGuard guard(0);
    for (int i = 0; i < 8; ++i)
      kernels::Fill(s0.get(), i == 7 ? 5.f : 0.f, on0, n);
  }
  StreamWaitFor(s1.get(), s0.get(), scratch);
  CUDA_CHECK(cudaMemcpyPeerAsync(on1, 1, on0, 0, n * sizeof(float), s1.get()));
  CUDA_CHECK(cudaMemcpyAsync(host.data(), on1, n * sizeof(float),
                             cudaMemcpyDeviceToHost, s1.get()));
  s1.Synchronize();
  EXPECT_EQ(host[0], 5.f);
  EXPECT_EQ(host[n - 1], 5.f);
  CUDA_CHECK(cudaFree(on1));
  DeviceGuard guard0(0);
  CUDA_CHECK(cudaFree(on0));
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
