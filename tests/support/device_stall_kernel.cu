#include "tests/support/device_stall_kernel.h"

namespace tandem {
namespace testing {
namespace {

__global__ void SpinUntilReleased(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

}  // namespace

cudaError_t LaunchSpinUntilReleased(const int* flag, cudaStream_t stream) {
  SpinUntilReleased<<<1, 1, 0, stream>>>(flag);
  return cudaGetLastError();
}

}  // namespace testing
}  // namespace tandem
