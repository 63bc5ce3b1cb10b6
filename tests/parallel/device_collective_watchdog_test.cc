// Tests parallel/device_collective_watchdog.h with stand-in collectives
// (flags the test sets), so it runs without a GPU: what counts as overdue,
// the message, asynchronous errors, and that it fires once.
#include "parallel/device_collective_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace tandem {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Records what the watchdog aborts with.
struct Aborts {
  std::mutex mu;
  std::string reason;
  int count = 0;
  Clock::time_point when;
  std::string async_error;  // what the transport reports, "" for none

  DeviceCollectiveWatchdog::Hooks Hooks() {
    DeviceCollectiveWatchdog::Hooks hooks;
    hooks.async_error = [this] {
      std::lock_guard<std::mutex> lock(mu);
      return async_error;
    };
    hooks.abort = [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu);
      reason = why;
      ++count;
      when = Clock::now();
    };
    return hooks;
  }
  int Count() {
    std::lock_guard<std::mutex> lock(mu);
    return count;
  }
  std::string Reason() {
    std::lock_guard<std::mutex> lock(mu);
    return reason;
  }
};

std::function<bool()> Flag(const std::shared_ptr<std::atomic<bool>>& flag) {
  return [flag] { return flag->load(); };
}

std::shared_ptr<std::atomic<bool>> NewFlag(bool value = false) {
  return std::make_shared<std::atomic<bool>>(value);
}

void WaitFor(const std::function<bool()>& condition, milliseconds limit) {
  const Clock::time_point end = Clock::now() + limit;
  while (!condition() && Clock::now() < end) std::this_thread::sleep_for(milliseconds(1));
}

TEST(DeviceCollectiveWatchdogTest, CompletedCollectivesAndIdleTimeAreNotCharged) {
  Aborts aborts;
  DeviceCollectiveWatchdog dog("comm", [] { return milliseconds(100); }, aborts.Hooks());
  for (int i = 0; i < 50; ++i) dog.Watch("AllReduce #" + std::to_string(i), Flag(NewFlag(true)));
  // Idle for three timeouts: nothing is queued, nothing is late.
  std::this_thread::sleep_for(milliseconds(300));
  auto late = NewFlag();
  dog.Watch("AllReduce #50", Flag(late));
  std::this_thread::sleep_for(milliseconds(50));
  late->store(true);
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(aborts.Count(), 0) << aborts.Reason();
  EXPECT_FALSE(dog.fired());
}

TEST(DeviceCollectiveWatchdogTest, AnOverdueCollectiveAbortsOnceNamingIt) {
  Aborts aborts;
  DeviceCollectiveWatchdog dog("NcclCommunicator(rank 1 of 2, cuda:1)",
                               [] { return milliseconds(100); }, aborts.Hooks());
  const Clock::time_point start = Clock::now();
  dog.Watch("AllReduce #7 (4096 bytes, sum, gradient bucket 3)", Flag(NewFlag()));
  dog.Watch("AllReduce #8 (64 bytes, sum, gradient bucket 4)", Flag(NewFlag()));
  WaitFor([&] { return aborts.Count() > 0; }, milliseconds(2000));
  ASSERT_EQ(aborts.Count(), 1);
  const double after_ms =
      std::chrono::duration<double, std::milli>(aborts.when - start).count();
  EXPECT_GE(after_ms, 100.0);
  EXPECT_LT(after_ms, 100.0 + 10 * DeviceCollectiveWatchdog::kPoll.count());
  EXPECT_EQ(aborts.Reason().find("NcclCommunicator(rank 1 of 2, cuda:1): AllReduce #7 (4096 "
                                 "bytes, sum, gradient bucket 3) did not complete within 100 ms "
                                 "on the device"),
            0u)
      << aborts.Reason();
  EXPECT_NE(aborts.Reason().find("1 collective(s) queued behind it"), std::string::npos)
      << aborts.Reason();
  EXPECT_NE(aborts.Reason().find("--collective_timeout"), std::string::npos);
  EXPECT_TRUE(dog.fired());
  // Fired once; later collectives are not watched.
  dog.Watch("AllReduce #9", Flag(NewFlag()));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(aborts.Count(), 1);
}

// A collective queued early (behind a long backward pass, behind another
// collective) is timed from when the one before it completed.
TEST(DeviceCollectiveWatchdogTest, TheClockStartsAtTheHeadOfTheQueue) {
  Aborts aborts;
  DeviceCollectiveWatchdog dog("comm", [] { return milliseconds(200); }, aborts.Hooks());
  auto first = NewFlag();
  auto second = NewFlag();
  dog.Watch("AllReduce #1", Flag(first));
  dog.Watch("AllReduce #2", Flag(second));
  std::this_thread::sleep_for(milliseconds(150));
  first->store(true);  // #2 reaches the head now, 150 ms after it was queued
  std::this_thread::sleep_for(milliseconds(150));
  second->store(true);  // 300 ms after queued, 150 ms at the head
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(aborts.Count(), 0) << aborts.Reason();
}

TEST(DeviceCollectiveWatchdogTest, TheTimeoutIsReadAtEveryPoll) {
  Aborts aborts;
  std::atomic<int64_t> limit{60 * 1000};
  DeviceCollectiveWatchdog dog("comm", [&] { return milliseconds(limit.load()); },
                               aborts.Hooks());
  dog.Watch("AllReduce #1", Flag(NewFlag()));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(aborts.Count(), 0);
  limit = 50;
  WaitFor([&] { return aborts.Count() > 0; }, milliseconds(1000));
  EXPECT_EQ(aborts.Count(), 1);
}

TEST(DeviceCollectiveWatchdogTest, AnAsynchronousErrorAbortsAtOnce) {
  Aborts aborts;
  DeviceCollectiveWatchdog dog("comm", [] { return milliseconds(60 * 1000); }, aborts.Hooks());
  dog.Watch("AllReduce #1", Flag(NewFlag()));
  {
    std::lock_guard<std::mutex> lock(aborts.mu);
    aborts.async_error = "NCCL error: remote process exited or there was a network error";
  }
  WaitFor([&] { return aborts.Count() > 0; }, milliseconds(1000));
  ASSERT_EQ(aborts.Count(), 1);
  EXPECT_EQ(aborts.Reason(),
            "comm: NCCL error: remote process exited or there was a network error (reported "
            "asynchronously)");
}

TEST(DeviceCollectiveWatchdogTest, AFailingCompletionCheckAborts) {
  Aborts aborts;
  DeviceCollectiveWatchdog dog("comm", [] { return milliseconds(60 * 1000); }, aborts.Hooks());
  dog.Watch("AllReduce #4", [] () -> bool { throw std::runtime_error("illegal address"); });
  WaitFor([&] { return aborts.Count() > 0; }, milliseconds(1000));
  ASSERT_EQ(aborts.Count(), 1);
  EXPECT_EQ(aborts.Reason(), "comm: AllReduce #4 failed: illegal address");
}

TEST(DeviceCollectiveWatchdogTest, DestroyedWhileWatchingWithoutAborting) {
  Aborts aborts;
  {
    DeviceCollectiveWatchdog dog("comm", [] { return milliseconds(50); }, aborts.Hooks());
    dog.Watch("AllReduce #1", Flag(NewFlag()));
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(aborts.Count(), 0);
}

}  // namespace
}  // namespace tandem
