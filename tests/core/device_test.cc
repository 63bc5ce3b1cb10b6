#include "core/device.h"

#include <gtest/gtest.h>

#include "core/backend_registry.h"
#include "core/check.h"

namespace tandem {
namespace {

TEST(DeviceTest, ParsesAndPrints) {
  EXPECT_EQ(ParseDevice("cpu"), Device::Cpu());
  EXPECT_EQ(ParseDevice("cuda"), Device::Cuda(0));
  EXPECT_EQ(ParseDevice("cuda:3"), Device::Cuda(3));
  EXPECT_EQ(Device::Cuda(1).ToString(), "cuda:1");
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
}

TEST(DeviceTest, RejectsUnknownNames) {
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", ""}) {
    try {
      ParseDevice(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown device"), std::string::npos);
    }
  }
}

TEST(DeviceTest, AutoPicksCudaOnlyWhenPresent) {
  const Device d = ResolveDevice("auto");
  EXPECT_EQ(d.is_cuda(), CudaDeviceCount() > 0);
}

TEST(DeviceTest, ExplicitCudaWithoutDevicesIsAClearError) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  try {
    ResolveDevice("cuda");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device=cuda but there are no CUDA devices"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(CudaUnavailableReason().empty());
}

}  // namespace
}  // namespace tandem
