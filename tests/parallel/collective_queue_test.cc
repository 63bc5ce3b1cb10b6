// Tests parallel/collective_queue.h with a stand-in transport: collectives
// run in FIFO order on one progress thread while the caller goes on; Wait
// rethrows what the transport threw, type kept; a failure or Abort fails
// what is queued behind it; timed Works measure the run; the watchdog names
// a stuck collective; destruction fails what is still queued.
#include "parallel/collective_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"

#include "tests/support/error_text.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;

Collective Numbered(uint64_t sequence, CollectiveKind kind = CollectiveKind::kAllReduce,
                    int64_t count = 10) {
  Collective c;
  c.kind = kind;
  c.sequence = sequence;
  c.count = count;
  return c;
}

using testing::ErrorText;

// Blocks the stand-in transport until opened.
class Gate {
 public:
  void Pass() { opened_.wait(); }
  void Open() { promise_.set_value(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> opened_ = promise_.get_future().share();
};

CollectiveQueueOptions Options(std::function<void(const Collective&)> run) {
  CollectiveQueueOptions options;
  options.owner = "TestCommunicator(rank 0 of 1)";
  options.run = std::move(run);
  return options;
}

// Waits (up to 5 s) until `work` has completed; false if it never does.
bool CompletesSoon(const Work& work) {
  for (int i = 0; i < 500 && !work.IsCompleted(); ++i) std::this_thread::sleep_for(10ms);
  return work.IsCompleted();
}

TEST(CollectiveQueueTest, RunsCollectivesInQueueOrderOnOneThread) {
  std::vector<uint64_t> ran;  // only the progress thread writes it
  std::vector<std::thread::id> threads;
  CollectiveQueue queue(Options([&](const Collective& c) {
    ran.push_back(c.sequence);
    threads.push_back(std::this_thread::get_id());
  }));
  std::vector<std::shared_ptr<Work>> works;
  for (uint64_t i = 1; i <= 200; ++i) works.push_back(queue.Enqueue(Numbered(i)));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->Wait();
  ASSERT_EQ(ran.size(), 200u);
  for (uint64_t i = 0; i < 200; ++i) EXPECT_EQ(ran[i], i + 1);
  for (const std::thread::id& id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(CollectiveQueueTest, EnqueueReturnsBeforeTheCollectiveRuns) {
  Gate gate;
  CollectiveQueue queue(Options([&](const Collective&) { gate.Pass(); }));
  std::shared_ptr<Work> work = queue.Enqueue(Numbered(1));
  std::shared_ptr<Work> next = queue.Enqueue(Numbered(2));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(work->IsCompleted());
  EXPECT_FALSE(work->ReadyForLanes());
  EXPECT_FALSE(next->IsCompleted());
  gate.Open();
  next->Wait();
  EXPECT_TRUE(work->IsCompleted());  // completed in queue order
  EXPECT_TRUE(work->ReadyForLanes());
}

TEST(CollectiveQueueTest, WaitRethrowsTheTypeTheTransportThrew) {
  CollectiveQueue aborted(Options([](const Collective&) {
    throw CollectiveAbortedError("collective aborted: peer left");
  }));
  std::shared_ptr<Work> work = aborted.Enqueue(Numbered(1));
  EXPECT_THROW(work->Wait(), CollectiveAbortedError);
  EXPECT_THROW(work->Wait(), CollectiveAbortedError);  // every time
  EXPECT_EQ(ErrorText([&] { work->Wait(); }), "collective aborted: peer left");

  CollectiveQueue failed(Options([](const Collective&) { throw Error("wire cut"); }));
  work = failed.Enqueue(Numbered(1));
  try {
    work->Wait();
    ADD_FAILURE() << "no error";
  } catch (const CollectiveAbortedError& e) {
    ADD_FAILURE() << "an Error became a CollectiveAbortedError: " << e.what();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "wire cut");
  }

  CollectiveQueue odd(Options([](const Collective&) { throw std::logic_error("odd"); }));
  EXPECT_THROW(odd.Enqueue(Numbered(1))->Wait(), std::logic_error);

  // A subclass of Error (a pipeline stage's abort, say) keeps its own type.
  class StageError : public Error {
   public:
    using Error::Error;
  };
  CollectiveQueue stage(Options([](const Collective&) { throw StageError("stage 2 left"); }));
  work = stage.Enqueue(Numbered(1));
  EXPECT_THROW(work->Wait(), StageError);
  EXPECT_EQ(ErrorText([&] { work->Wait(); }), "stage 2 left");
}

// A rank whose collective failed cannot pair its later ones with its peers':
// they fail at once, saying why.
TEST(CollectiveQueueTest, AFailureFailsEverythingBehindIt) {
  std::vector<uint64_t> ran;
  Gate gate;
  CollectiveQueue queue(Options([&](const Collective& c) {
    ran.push_back(c.sequence);
    gate.Pass();
    if (c.sequence == 1) throw Error("AllReduce #1: wire cut");
  }));
  std::shared_ptr<Work> first = queue.Enqueue(Numbered(1));
  std::shared_ptr<Work> queued = queue.Enqueue(Numbered(2));
  gate.Open();
  EXPECT_THROW(first->Wait(), Error);
  const std::string expected = "collective aborted: an earlier collective failed: "
                               "AllReduce #1: wire cut";
  EXPECT_THROW(queued->Wait(), CollectiveAbortedError);
  EXPECT_EQ(ErrorText([&] { queued->Wait(); }), expected);
  EXPECT_EQ(ErrorText([&] { queue.Enqueue(Numbered(3))->Wait(); }), expected);
  EXPECT_TRUE(queue.aborted());
  EXPECT_EQ(ran, std::vector<uint64_t>{1});
}

TEST(CollectiveQueueTest, AbortFailsQueuedWorkButNotTheRunningOne) {
  std::vector<uint64_t> ran;
  Gate entered, gate;
  CollectiveQueue queue(Options([&](const Collective& c) {
    ran.push_back(c.sequence);
    entered.Open();
    gate.Pass();
  }));
  std::shared_ptr<Work> running = queue.Enqueue(Numbered(1));
  entered.Pass();  // #1 is running
  std::shared_ptr<Work> second = queue.Enqueue(Numbered(2));
  std::shared_ptr<Work> third = queue.Enqueue(Numbered(3));
  queue.Abort("rank 2 gave up");
  queue.Abort("a later reason");  // the first one is kept
  // Failed at once, while the running one is still held at the gate.
  EXPECT_TRUE(second->IsCompleted());
  EXPECT_TRUE(third->IsCompleted());
  EXPECT_FALSE(running->IsCompleted());
  EXPECT_THROW(second->Wait(), CollectiveAbortedError);
  EXPECT_EQ(ErrorText([&] { third->Wait(); }), "collective aborted: rank 2 gave up");
  std::shared_ptr<Work> later = queue.Enqueue(Numbered(4));
  EXPECT_TRUE(later->IsCompleted());
  EXPECT_THROW(later->Wait(), CollectiveAbortedError);
  gate.Open();
  EXPECT_NO_THROW(running->Wait());
  EXPECT_EQ(ran, std::vector<uint64_t>{1});
  EXPECT_TRUE(queue.aborted());
}

TEST(CollectiveQueueTest, TimedWorkMeasuresTheRunOnTheHostClock) {
  Gate gate;
  CollectiveQueue queue(Options([&](const Collective&) {
    gate.Pass();
    std::this_thread::sleep_for(10ms);
  }));
  Collective timed = Numbered(1);
  timed.options.timed = true;
  std::shared_ptr<Work> work = queue.Enqueue(timed);
  std::thread opener([&] {
    std::this_thread::sleep_for(30ms);
    gate.Open();
  });
  EXPECT_NE(work->started(), nullptr);
  EXPECT_NE(work->finished(), nullptr);
  if (work->started() != nullptr && work->finished() != nullptr) {
    EXPECT_FALSE(work->finished()->Query());
    // Waits for the end before measuring.
    const double ms = work->finished()->ElapsedMsSince(*work->started());
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_TRUE(work->finished()->Query());
    EXPECT_GE(ms, 0.0);
    EXPECT_GE(ms, 10.0);  // the run, including the gate: at least the sleep
  }
  opener.join();
  work->Wait();

  std::shared_ptr<Work> untimed = queue.Enqueue(Numbered(2));
  EXPECT_EQ(untimed->started(), nullptr);
  EXPECT_EQ(untimed->finished(), nullptr);
  untimed->Wait();

  // A timed collective that never ran (aborted) still measures, as ~0.
  queue.Abort("stop");
  std::shared_ptr<Work> failed = queue.Enqueue(timed);
  EXPECT_GE(failed->finished()->ElapsedMsSince(*failed->started()), 0.0);
}

TEST(CollectiveQueueTest, WatchdogNamesTheStuckCollective) {
  std::mutex mutex;
  std::vector<std::string> reports;
  CollectiveQueueOptions options = Options([](const Collective& c) {
    if (c.sequence == 5) std::this_thread::sleep_for(600ms);
  });
  options.timeout = 10s;
  options.on_timeout = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(what);
  };
  CollectiveQueue queue(std::move(options));
  queue.set_timeout(100ms);
  for (uint64_t i = 1; i <= 4; ++i) queue.Enqueue(Numbered(i))->Wait();
  queue.Enqueue(Numbered(5, CollectiveKind::kBarrier, 0))->Wait();
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rfind("TestCommunicator(rank 0 of 1): Barrier #5 (0 bytes) did not "
                             "finish within 0.1",
                             0),
            0u)
      << reports[0];
}

// The watchdog gives the stuck collective's size in bytes of its dtype.
TEST(CollectiveQueueTest, WatchdogCountsTheBytesOfTheDType) {
  std::mutex mutex;
  std::vector<std::string> reports;
  CollectiveQueueOptions options = Options([](const Collective& c) {
    if (c.sequence == 2) std::this_thread::sleep_for(600ms);
  });
  options.on_timeout = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(what);
  };
  CollectiveQueue queue(std::move(options));
  queue.set_timeout(100ms);
  queue.Enqueue(Numbered(1))->Wait();
  Collective half = Numbered(2, CollectiveKind::kAllReduce, 1000);
  half.dtype = DType::kBFloat16;
  queue.Enqueue(half)->Wait();
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rfind("TestCommunicator(rank 0 of 1): AllReduce #2 (2000 bytes) did not",
                             0),
            0u)
      << reports[0];
}

TEST(CollectiveQueueTest, DestructionWithNothingQueuedReturns) {
  { CollectiveQueue never_used(Options([](const Collective&) {})); }
  std::shared_ptr<Work> work;
  {
    CollectiveQueue queue(Options([](const Collective&) {}));
    work = queue.Enqueue(Numbered(1));
    work->Wait();
  }
  EXPECT_NO_THROW(work->Wait());  // a Work outlives its queue
}

TEST(CollectiveQueueTest, DestructionFailsQueuedWorkAndWaitsForTheRunningOne) {
  Gate entered, gate;
  auto queue = std::make_unique<CollectiveQueue>(Options([&](const Collective&) {
    entered.Open();
    gate.Pass();
  }));
  std::shared_ptr<Work> running = queue->Enqueue(Numbered(1));
  entered.Pass();  // #1 is running
  std::shared_ptr<Work> queued = queue->Enqueue(Numbered(2));
  std::thread destroyer([&] { queue.reset(); });
  EXPECT_TRUE(CompletesSoon(*queued));
  EXPECT_FALSE(running->IsCompleted());  // the destructor waits for it
  gate.Open();
  destroyer.join();
  EXPECT_NO_THROW(running->Wait());
  EXPECT_THROW(queued->Wait(), CollectiveAbortedError);
  EXPECT_EQ(ErrorText([&] { queued->Wait(); }),
            "collective aborted: TestCommunicator(rank 0 of 1) was destroyed with this "
            "collective queued");
}

TEST(CollectiveQueueTest, RejectsMissingPieces) {
  EXPECT_NE(ErrorText([] { CollectiveQueue queue(Options(nullptr)); }).find("needs a run"),
            std::string::npos);
  CollectiveQueue queue(Options([](const Collective&) {}));
  EXPECT_NE(ErrorText([&] { queue.set_timeout(1s); }).find("no watchdog"), std::string::npos);
}

}  // namespace
}  // namespace tandem
