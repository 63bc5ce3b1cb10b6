#include "trainer/stop_signal.h"

#include <gtest/gtest.h>

#include <csignal>
#include <thread>
#include <vector>

#include "core/check.h"
#include "parallel/thread_communicator.h"

namespace tandem {
namespace {

TEST(StopSignalsTest, RecordsTheFirstSignalOnly) {
  StopSignals signals;
  EXPECT_EQ(StopSignals::received(), 0);
  ASSERT_EQ(std::raise(SIGUSR1), 0);  // the process lives on: handled
  EXPECT_EQ(StopSignals::received(), SIGUSR1);
  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_EQ(StopSignals::received(), SIGUSR1);
}

TEST(StopSignalsTest, PutsTheDefaultActionBackAfterTheFirstSignal) {
  // A second Ctrl-C ends the process: SIGINT's default action again.
  StopSignals signals;
  ASSERT_EQ(std::raise(SIGINT), 0);
  struct sigaction now = {};
  ASSERT_EQ(sigaction(SIGINT, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(StopSignalsTest, RestoresThePreviousHandlersAndStartsAfresh) {
  struct sigaction before = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &before), 0);
  {
    StopSignals signals;
    ASSERT_EQ(std::raise(SIGTERM), 0);
    EXPECT_EQ(StopSignals::received(), SIGTERM);
  }
  struct sigaction after = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  StopSignals again;
  EXPECT_EQ(StopSignals::received(), 0);
}

TEST(StopSignalsTest, OneAtATime) {
  StopSignals signals;
  EXPECT_THROW(StopSignals second, Error);
}

TEST(StopSignalsTest, NamesTheSignals) {
  EXPECT_EQ(StopSignals::Name(SIGTERM), "SIGTERM");
  EXPECT_EQ(StopSignals::Name(SIGINT), "SIGINT");
  EXPECT_EQ(StopSignals::Name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(StopSignals::Name(SIGHUP), "signal " + std::to_string(SIGHUP));
}

// One worker's wish to stop is every worker's decision, and a worker that
// does not wish it is not stopped alone.
TEST(AgreeToStopTest, AnyWorkerStopsThemAll) {
  for (int asking = -1; asking < 3; ++asking) {
    ThreadGroup group(3);
    std::vector<int> decisions(3, -1);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        decisions[r] = AgreeToStop(group.communicator(r), r == asking) ? 1 : 0;
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(decisions[r], asking >= 0 ? 1 : 0) << "rank " << r << ", asking " << asking;
    }
  }
}

}  // namespace
}  // namespace tandem
