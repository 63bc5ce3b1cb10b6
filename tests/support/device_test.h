// One test body, every device: derive a fixture from DeviceTest and use
// INSTANTIATE_DEVICE_TEST_SUITE_P. CUDA cases skip, saying why, where no GPU
// is visible; CPU cases always run, so a suite never passes on skips alone.
//
//   class OpsTest : public DeviceTest {};
//   TEST_P(OpsTest, Fill) { Tensor t = Tensor::Zeros({3}, device()); ... }
//   INSTANTIATE_DEVICE_TEST_SUITE_P(OpsTest);
#ifndef TANDEM_TESTS_SUPPORT_DEVICE_TEST_H_
#define TANDEM_TESTS_SUPPORT_DEVICE_TEST_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/device.h"

namespace tandem {
namespace testing {

class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda() && CudaDeviceCount() == 0) {
      GTEST_SKIP() << "skipping " << GetParam() << ": " << CudaUnavailableReason();
    }
  }
  Device device() const { return GetParam(); }
};

inline std::string DeviceTestName(const ::testing::TestParamInfo<Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda" + std::to_string(info.param.index);
}

}  // namespace testing
}  // namespace tandem

#define INSTANTIATE_DEVICE_TEST_SUITE_P(suite)                              \
  INSTANTIATE_TEST_SUITE_P(Devices, suite,                                  \
                           ::testing::Values(::tandem::Device::Cpu(),       \
                                             ::tandem::Device::Cuda(0)),    \
                           ::tandem::testing::DeviceTestName)

#endif  // TANDEM_TESTS_SUPPORT_DEVICE_TEST_H_
