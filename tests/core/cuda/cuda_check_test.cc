// CUDA_CHECK / CUBLAS_CHECK format errors without touching a device, so these
// run on the build machine too.
#include "core/cuda/cuda_check.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

std::string ThrownText(void (*fn)()) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaCheckTest, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST(CudaCheckTest, CarriesCallErrorStringAndContext) {
  const std::string text = ThrownText([] {
    CUDA_CHECK(cudaErrorMemoryAllocation) << "allocating " << 1024 << " bytes";
  });
  EXPECT_NE(text.find("allocating 1024 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("cudaErrorMemoryAllocation"), std::string::npos) << text;
  EXPECT_NE(text.find(cudaGetErrorString(cudaErrorMemoryAllocation)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tests/core/cuda/cuda_check_test.cc:"), std::string::npos)
      << text;
}

TEST(CudaCheckTest, CublasCarriesStatus) {
  const std::string text =
      ThrownText([] { CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED); });
  EXPECT_NE(text.find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cuBLAS error"), std::string::npos) << text;
}

TEST(CudaCheckTest, MessageArgument) {
  const std::string text =
      ThrownText([] { CUDA_CHECK(cudaErrorInvalidValue, "bad size"); });
  EXPECT_EQ(text.rfind("bad size: CUDA error cudaErrorInvalidValue", 0), 0u)
      << text;
}

}  // namespace
}  // namespace tandem
