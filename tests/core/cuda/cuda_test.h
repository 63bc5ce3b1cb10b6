// A fixture for tests that need a GPU: each test skips, saying why, where no
// CUDA device is visible (as on the build machine). Every suite here also has
// tests that run without a GPU, so a suite never passes on skips alone.
#ifndef TANDEM_TESTS_CORE_CUDA_CUDA_TEST_H_
#define TANDEM_TESTS_CORE_CUDA_CUDA_TEST_H_

#include <gtest/gtest.h>

#include "core/cuda/cuda_backend.h"

namespace tandem {
namespace testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) {
      GTEST_SKIP() << "needs a GPU: " << cuda::UnavailableReason();
    }
  }
};

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_CORE_CUDA_CUDA_TEST_H_
