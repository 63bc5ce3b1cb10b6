// Tests parallel/nccl_work.h: the event pool (on the CPU, everywhere), and
// the Work of NCCL collectives as one GPU can show it, on a communicator of
// one rank: ordering against the lanes it follows and the lanes that wait
// for it, host waits, timing, recycled events, Abort, argument errors. The
// GPU tests skip, saying why, where no GPU is visible. Cross-rank behaviour:
// nccl_communicator_test.
#include "parallel/nccl_work.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "parallel/nccl_communicator.h"
#include "parallel/nccl_thread_group.h"
#include "tests/support/error_text.h"
#include "tests/support/rank_values.h"

namespace tandem {
namespace {

using testing::KeepBusy;
using testing::Mismatches;
using testing::OnDevice;
using testing::RankValues;

using testing::ErrorText;

// The pool hands an event back out once its holder drops it, keeps the two
// kinds apart, and its events work through the wrapper (CPU events here).
TEST(LaneEventPoolTest, RecyclesEventsOfEachKind) {
  Backend& cpu = GetBackend(Device::Cpu());
  auto pool = std::make_shared<LaneEventPool>(SharedBackend(Device::Cpu()));
  std::unique_ptr<LaneEvent> first = pool->Take(/*timing=*/false);
  const LaneEvent* inner = &LaneEventPool::Inner(*first);
  EXPECT_NE(inner, first.get());
  first.reset();
  std::unique_ptr<LaneEvent> again = pool->Take(false);
  EXPECT_EQ(&LaneEventPool::Inner(*again), inner) << "the returned event was not reused";
  std::unique_ptr<LaneEvent> second = pool->Take(false);
  EXPECT_NE(&LaneEventPool::Inner(*second), inner);
  EXPECT_EQ(pool->created(), 2);

  std::unique_ptr<LaneEvent> start = pool->Take(/*timing=*/true);
  std::unique_ptr<LaneEvent> end = pool->Take(/*timing=*/true);
  EXPECT_EQ(pool->created(), 4) << "a timing event was taken from the ordering events";
  cpu.Record(LaneEventPool::Inner(*start), cpu.main_lane());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  cpu.Record(LaneEventPool::Inner(*end), cpu.main_lane());
  EXPECT_TRUE(end->Query());
  EXPECT_GE(end->ElapsedMsSince(*start), 1.0);
  // Events returned after their pool's owner let go still find the pool.
  pool.reset();
  start.reset();
  end.reset();
}

// ---------------------------------------------------------------------------
// With one GPU: a communicator of one rank

// One NCCL rank on cuda:0.
class OneRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_UNLESS_GPUS(1);
    BindThreadToDevice(gpu_);
    group_ = std::make_unique<NcclThreadGroup>(std::vector<int>{0});
  }
  NcclCommunicator& comm() { return group_->communicator(0); }
  Backend& backend() { return GetBackend(gpu_); }

  const Device gpu_ = Device::Cuda(0);
  std::unique_ptr<NcclThreadGroup> group_;
};

TEST_F(OneRankTest, DescribesItself) {
  EXPECT_EQ(comm().Describe().rfind("NcclCommunicator(rank 0 of 1, cuda:0, NCCL ", 0), 0u)
      << comm().Describe();
  EXPECT_EQ(comm().device(), 0);
  EXPECT_FALSE(comm().symmetric_memory()) << "one rank has no peers to share windows with";
  EXPECT_EQ(comm().timeout(), NcclCommunicator::kDefaultTimeout);
}

// An out-of-place all-gather of one rank copies send into recv: with send
// written last behind busy GEMMs on `producer`, recv holds the new values
// only if the collective followed `producer`, and `reader` sees them only if
// it waited for the Work. None of it makes the host wait.
void CheckOrdering(NcclCommunicator& comm, Device gpu, bool side) {
  constexpr int64_t kN = int64_t{1} << 20;
  Backend& backend = GetBackend(gpu);
  const Lane main = backend.main_lane();
  const Lane producer = side ? backend.side_lane() : main;
  Tensor staged = OnDevice(RankValues(7, kN), gpu);
  Tensor send = Tensor::Zeros({kN}, gpu);
  Tensor recv = Tensor::Full({kN}, -1.f, gpu);
  KeepBusy(producer, gpu);
  send.CopyFrom(staged, producer);  // queued last
  const int64_t waits = cuda::HostWaitCount();
  std::shared_ptr<Work> work =
      comm.AllGather(send.data(), kN, recv.data(), CollectiveOptions{{producer}, false});
  EXPECT_TRUE(work->ReadyForLanes());
  work->WaitOn(producer);
  ops::Scale(producer, recv, 2.f);  // reads the gathered values
  ops::WaitFor(main, producer);
  EXPECT_EQ(cuda::HostWaitCount(), waits) << "queueing made the host wait";
  EXPECT_EQ(Mismatches(recv.ToVector(), [](int64_t i) { return 2.f * (7 + i * 0.5f); }), "")
      << (side ? "side lane" : "main lane");
  EXPECT_TRUE(work->IsCompleted());
}

TEST_F(OneRankTest, CollectiveFollowsTheMainLaneAndWaitOnOrdersTheReader) {
  CheckOrdering(comm(), gpu_, /*side=*/false);
}

TEST_F(OneRankTest, CollectiveFollowsTheLanesItIsGiven) {
  CheckOrdering(comm(), gpu_, /*side=*/true);
}

// Work::Wait on the host: the result is in place when it returns, and later
// main-lane work follows it without a WaitOn.
TEST_F(OneRankTest, WaitPutsTheResultInPlace) {
  Tensor data = OnDevice(RankValues(3, 1000), gpu_);
  std::shared_ptr<Work> work = comm().AllReduce(data.data(), 1000, ReduceOp::kAverage);
  work->Wait();
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(Mismatches(data.ToVector(), [](int64_t i) { return 3 + i * 0.5f; }), "");
  comm().Barrier()->Wait();
  // WaitOn a CPU lane is a host wait.
  std::shared_ptr<Work> again = comm().Broadcast(data.data(), 1000, 0);
  again->WaitOn(GetBackend(Device::Cpu()).main_lane());
  EXPECT_TRUE(again->IsCompleted());
}

TEST_F(OneRankTest, TimedWorkRecordsItsStartAndEnd) {
  Tensor data = OnDevice(RankValues(0, 1 << 20), gpu_);
  std::shared_ptr<Work> plain = comm().AllReduce(data.data(), 1 << 20, ReduceOp::kSum);
  EXPECT_EQ(plain->started(), nullptr);
  EXPECT_EQ(plain->finished(), nullptr);
  CollectiveOptions timed;
  timed.timed = true;
  std::shared_ptr<Work> work = comm().AllReduce(data.data(), 1 << 20, ReduceOp::kSum, timed);
  ASSERT_NE(work->started(), nullptr);
  ASSERT_NE(work->finished(), nullptr);
  const double ms = work->finished()->ElapsedMsSince(*work->started());
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 10000.0);
  work->Wait();
  plain->Wait();
}

// Collectives create no events once the first have been returned: an
// event goes back to the pool when its Work is dropped and the watchdog has
// seen it complete (it polls every DeviceCollectiveWatchdog::kPoll), so a
// second round of the same collectives takes them all from the pool.
TEST_F(OneRankTest, EventsAreRecycled) {
  Tensor data = OnDevice(RankValues(0, 4096), gpu_);
  const Lane main = backend().main_lane();
  auto round = [&] {
    for (int step = 0; step < 50; ++step) {
      CollectiveOptions options{{main}, /*timed=*/step % 2 == 1};
      std::shared_ptr<Work> work = comm().AllReduce(data.data(), 4096, ReduceOp::kSum, options);
      work->WaitOn(main);
    }
    backend().Synchronize(main);
    std::this_thread::sleep_for(10 * DeviceCollectiveWatchdog::kPoll);
  };
  round();
  const int created = comm().events_created();
  // At most an ordering event per collective in flight, and a start and an
  // end for the timed ones.
  EXPECT_LE(created, 50 + 2);
  // The second round reuses the first round's events: it may need a few
  // more (the watchdog hands an event back only at its next poll, so how
  // many are in flight at once varies), never one per collective.
  round();
  EXPECT_LT(comm().events_created(), created + 50 / 2);
}

TEST_F(OneRankTest, NoElementsIsDoneAtOnce) {
  std::shared_ptr<Work> work = comm().AllReduce(nullptr, 0, ReduceOp::kSum);
  EXPECT_TRUE(work->IsCompleted());
  work->Wait();
  EXPECT_EQ(comm().sequence(), 1u) << "an empty collective is still numbered";
}

TEST_F(OneRankTest, AbortFailsLaterCollectivesAndWaits) {
  Tensor data = OnDevice(RankValues(0, 1000), gpu_);
  std::shared_ptr<Work> before = comm().AllReduce(data.data(), 1000, ReduceOp::kSum);
  before->Wait();
  comm().Abort("deliberate abort");
  comm().Abort("a second reason, ignored");
  EXPECT_TRUE(comm().aborted());
  const std::string expected = "collective aborted: deliberate abort";
  EXPECT_EQ(ErrorText([&] { before->Wait(); }), expected);
  EXPECT_EQ(ErrorText([&] { before->WaitOn(backend().main_lane()); }), expected);
  EXPECT_EQ(ErrorText([&] { (void)comm().AllReduce(data.data(), 1000, ReduceOp::kSum); }),
            expected);
  EXPECT_THROW((void)comm().Barrier(), CollectiveAbortedError);
}

TEST_F(OneRankTest, BadCountsAndRootsNameTheCollective) {
  const std::string root = ErrorText([&] { (void)comm().Broadcast(nullptr, 4, /*root=*/1); });
  EXPECT_NE(root.find("NcclCommunicator(rank 0 of 1, cuda:0, NCCL "), std::string::npos) << root;
  EXPECT_NE(root.find("Broadcast #1 (16 bytes, root 1): root 1 is not a rank"), std::string::npos)
      << root;
  const std::string count =
      ErrorText([&] { (void)comm().AllReduce(nullptr, -1, ReduceOp::kSum); });
  EXPECT_NE(count.find("AllReduce #2 (-4 bytes, sum): the count must not be negative"),
            std::string::npos)
      << count;
  const std::string lane = ErrorText(
      [&] { (void)comm().AllReduce(nullptr, 4, ReduceOp::kSum, CollectiveOptions{{Lane()}}); });
  EXPECT_NE(lane.find("AllReduce #3 (16 bytes, sum): CollectiveOptions::after names no lane"),
            std::string::npos)
      << lane;
}

TEST_F(OneRankTest, ReduceBuffersAreOrdinaryZeroedMemory) {
  Tensor buffer = comm().NewReduceBuffer(1000, gpu_);
  ASSERT_EQ(buffer.shape(), (Shape{1000}));
  EXPECT_EQ(Mismatches(buffer.ToVector(), [](int64_t) { return 0.f; }), "");
  EXPECT_EQ(comm().NewReduceBuffer(0, gpu_).numel(), 0);
  const std::string text = ErrorText([&] { comm().NewReduceBuffer(4, Device::Cpu()); });
  EXPECT_NE(text.find("a reduce buffer on cpu (this communicator reduces memory of cuda:0)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tandem
