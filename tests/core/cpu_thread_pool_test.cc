// Tests core/cpu/cpu_thread_pool.h: ParallelFor runs every task once, also
// for callers at once, and rethrows a task's exception after all have run;
// reserved helpers serve calls that want no more; callers in ParallelFor at
// the same time each get their own helpers (Note [Helpers for every
// caller]): two callers of 4 threads run 8 tasks at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {
namespace {

// Tasks that wait, up to a deadline, until `expected` of them are running
// at once; Met() says whether they all were.
class Rendezvous {
 public:
  explicit Rendezvous(int expected) : expected_(expected) {}

  void Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == expected_) all_.notify_all();
    const bool met =
        all_.wait_for(lock, std::chrono::seconds(10), [&] { return arrived_ >= expected_; });
    if (!met) timed_out_ = true;
  }
  bool Met() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrived_ >= expected_ && !timed_out_;
  }

 private:
  const int expected_;
  std::mutex mu_;
  std::condition_variable all_;
  int arrived_ = 0;
  bool timed_out_ = false;
};

TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  ThreadPool pool;
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> runs(37);
    pool.ParallelFor(37, threads, [&](int64_t i) { ++runs[static_cast<size_t>(i)]; });
    for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i], 1) << "task " << i;
  }
  EXPECT_EQ(pool.helpers(), 4);
}

TEST(ThreadPoolTest, RunsEveryTaskOnceFromConcurrentCallers) {
  ThreadPool pool;
  constexpr int kCallers = 4, kTasks = 1000;
  std::vector<std::atomic<int>> counts(kCallers * kTasks);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        pool.ParallelFor(kTasks, 3, [&](int64_t i) { counts[c * kTasks + i]++; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& n : counts) ASSERT_EQ(n.load(), 20);
  // Each caller's 2 helpers at most (Note [Helpers for every caller]).
  EXPECT_LE(pool.helpers(), kCallers * 2);
}

TEST(ThreadPoolTest, RethrowsATaskError) {
  ThreadPool pool;
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(16, 2,
                                [&](int64_t i) {
                                  ran++;
                                  if (i == 5) throw std::runtime_error("task 5");
                                }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 16) << "the other tasks still run";
  pool.ParallelFor(4, 2, [&](int64_t) { ran++; });
  EXPECT_EQ(ran.load(), 20) << "the pool works after an error";
}

TEST(ThreadPoolTest, ReservedHelpersServeCallsThatWantNoMore) {
  ThreadPool pool;
  pool.Reserve(3);
  EXPECT_EQ(pool.helpers(), 3);
  std::atomic<int> ran{0};
  pool.ParallelFor(8, 4, [&](int64_t) { ++ran; });
  EXPECT_EQ(ran, 8);
  EXPECT_EQ(pool.helpers(), 3) << "a call wanting 3 helpers started more than the 3 reserved";
}

TEST(ThreadPoolTest, CallersAtOnceEachGetTheirHelpers) {
  ThreadPool pool;
  constexpr int kCallers = 2, kThreads = 4;
  Rendezvous all_running(kCallers * kThreads);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      pool.ParallelFor(kThreads, kThreads, [&](int64_t) { all_running.Arrive(); });
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_TRUE(all_running.Met()) << "the 8 tasks of 2 callers of 4 threads did not all run at once";
  EXPECT_EQ(pool.helpers(), kCallers * (kThreads - 1));
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
