// ProfileRange through its test listener: ranges begin and end with their
// scopes, nest, carry their names, build a name only when recorded, and stop
// reporting once the listener is removed.
#include "core/profile_range.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem {
namespace {

// "+name" for a begin, "-name" for an end, in order.
class ProfileRangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetProfileRangeListenerForTesting([this](const char* name, bool push) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back((push ? "+" : "-") + std::string(name));
    });
  }
  void TearDown() override { SetProfileRangeListenerForTesting(nullptr); }

  std::vector<std::string> Events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

  std::mutex mutex_;
  std::vector<std::string> events_;
};

TEST_F(ProfileRangeTest, RangesNestWithTheirScopes) {
  EXPECT_TRUE(ProfileRange::Enabled());
  {
    ProfileRange step("step 1");
    {
      ProfileRange forward(std::string("forward fc1"));
    }
    ProfileRange update("optimizer step");
  }
  EXPECT_EQ(Events(), (std::vector<std::string>{"+step 1", "+forward fc1", "-forward fc1",
                                                "+optimizer step", "-optimizer step",
                                                "-step 1"}));
}

TEST_F(ProfileRangeTest, NameFunctionRunsOnlyWhenRecorded) {
  int built = 0;
  auto name = [&built] {
    ++built;
    return std::string("all-reduce bucket ") + std::to_string(3);
  };
  { ProfileRange range(name); }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(Events(), (std::vector<std::string>{"+all-reduce bucket 3", "-all-reduce bucket 3"}));

  SetProfileRangeListenerForTesting(nullptr);
  if (ProfileRange::Enabled()) {
    GTEST_SKIP() << "an NVTX tool (a profiler) is attached, so ranges are recorded anyway";
  }
  { ProfileRange range(name); }
  EXPECT_EQ(built, 1) << "the name was built with nothing recording it";
}

// A range open when the listener goes away ends quietly; ranges opened
// after that report nothing.
TEST_F(ProfileRangeTest, RemovedListenerHearsNothingMore) {
  {
    ProfileRange outer("outer");
    SetProfileRangeListenerForTesting(nullptr);
    ProfileRange inner("inner");
  }
  EXPECT_EQ(Events(), std::vector<std::string>{"+outer"});
}

// Each thread's ranges nest on their own.
TEST_F(ProfileRangeTest, ThreadsReportTheirOwnRanges) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 100; ++i) {
        ProfileRange outer("worker " + std::to_string(t));
        ProfileRange inner("layer");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<std::string> events = Events();
  EXPECT_EQ(events.size(), 4u * 100u * 4u);
  for (int t = 0; t < 4; ++t) {
    const std::string name = "worker " + std::to_string(t);
    int begins = 0, ends = 0;
    for (const std::string& e : events) {
      begins += e == "+" + name;
      ends += e == "-" + name;
    }
    EXPECT_EQ(begins, 100) << name;
    EXPECT_EQ(ends, 100) << name;
  }
}

}  // namespace
}  // namespace tandem
