// Tests parallel/no_device_communicators.cc, the implementation of
// parallel/device_communicators.h for builds without CUDA. It is built and
// run in every build (//parallel:no_device_communicators), so that what a
// CPU-only user meets is checked on GPU machines too.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "parallel/device_communicators.h"
#include "parallel/thread_communicator.h"

#include "tests/support/error_text.h"

namespace tandem {
namespace {

constexpr const char* kWhy = "this build has no CUDA (";

using testing::ErrorText;

TEST(NoDeviceCommunicatorsTest, SaysWhyThereAreNone) {
  std::string why;
  EXPECT_FALSE(DeviceCommunicatorsAvailable(&why));
  EXPECT_EQ(why.rfind(kWhy, 0), 0u) << why;
  EXPECT_NE(why.find("--device=cpu"), std::string::npos) << why;
  EXPECT_FALSE(DeviceCommunicatorsAvailable());
}

TEST(NoDeviceCommunicatorsTest, ThreadGroupsFailNamingWhy) {
  const std::string error = ErrorText([] { MakeThreadDeviceGroup({0, 1}, 1, {}); });
  EXPECT_EQ(error.rfind(std::string("MakeThreadDeviceGroup: ") + kWhy, 0), 0u) << error;
}

TEST(NoDeviceCommunicatorsTest, RankCommunicatorsFailNamingTheHostAndWhy) {
  ThreadGroup host(1);
  const std::string error =
      ErrorText([&] { MakeRankDeviceCommunicators(host.communicator(0), 0, 1, {}); });
  EXPECT_EQ(error.rfind("MakeRankDeviceCommunicators on " + host.communicator(0).Describe() +
                            ": " + kWhy,
                        0),
            0u)
      << error;
}

}  // namespace
}  // namespace tandem
