// Tests parallel/collective_watchdog.h on its own: a collective left
// unfinished past the timeout is reported once, named; finished ones and a
// stream of short ones are not. (The MPI use: mpi_collective_timeout_test.)
#include "parallel/collective_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Reports {
  std::mutex mu;
  std::vector<std::string> messages;
  std::vector<Clock::time_point> times;
};

std::string Describe(const char* kind, uint64_t sequence, int64_t count) {
  return std::string(kind) + " #" + std::to_string(sequence) + " (" + std::to_string(count) +
         " elements)";
}

TEST(CollectiveWatchdogTest, UnfinishedCollectiveIsReportedOnceAndNamed) {
  Reports reports;
  CollectiveWatchdog dog(200ms, Describe, [&reports](const std::string& what) {
    std::lock_guard<std::mutex> lock(reports.mu);
    reports.messages.push_back(what);
    reports.times.push_back(Clock::now());
  });
  const Clock::time_point start = Clock::now();
  {
    auto watch = dog.Start("Barrier", 7, 0);
    std::this_thread::sleep_for(800ms);  // stuck well past the timeout
  }
  std::lock_guard<std::mutex> lock(reports.mu);
  ASSERT_EQ(reports.messages.size(), 1u);
  EXPECT_EQ(reports.messages[0].rfind("Barrier #7 (0 elements) did not finish within 0.2", 0),
            0u)
      << reports.messages[0];
  // Within the timeout plus one poll interval (an eighth of the timeout)
  // and scheduling slack.
  const double after = std::chrono::duration<double>(reports.times[0] - start).count();
  EXPECT_GE(after, 0.2);
  EXPECT_LT(after, 0.6);
}

TEST(CollectiveWatchdogTest, FinishedAndShortCollectivesAreNotReported) {
  Reports reports;
  CollectiveWatchdog dog(150ms, Describe, [&reports](const std::string& what) {
    std::lock_guard<std::mutex> lock(reports.mu);
    reports.messages.push_back(what);
  });
  // Many collectives, each shorter than the timeout, for longer than it in
  // total: the watchdog must time each one, not the stream.
  const Clock::time_point end = Clock::now() + 600ms;
  uint64_t sequence = 0;
  while (Clock::now() < end) {
    auto watch = dog.Start("AllReduce", ++sequence, 1000);
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(300ms);  // idle: nothing is being watched
  std::lock_guard<std::mutex> lock(reports.mu);
  EXPECT_TRUE(reports.messages.empty()) << reports.messages[0];
}

TEST(CollectiveWatchdogTest, LongerTimeoutSetLaterApplies) {
  Reports reports;
  CollectiveWatchdog dog(100ms, Describe, [&reports](const std::string& what) {
    std::lock_guard<std::mutex> lock(reports.mu);
    reports.messages.push_back(what);
  });
  dog.set_timeout(2s);
  {
    auto watch = dog.Start("Broadcast", 1, 10);
    std::this_thread::sleep_for(400ms);
  }
  std::lock_guard<std::mutex> lock(reports.mu);
  EXPECT_TRUE(reports.messages.empty());
}

}  // namespace
}  // namespace tandem
