// The kernel behind DeviceStall (device_stall.h): spins until *flag is not 0.
#ifndef TANDEM_TESTS_SUPPORT_DEVICE_STALL_KERNEL_H_
#define TANDEM_TESTS_SUPPORT_DEVICE_STALL_KERNEL_H_

#include <cuda_runtime.h>

namespace tandem {
namespace testing {

// `flag` is a device pointer to mapped host memory.
cudaError_t LaunchSpinUntilReleased(const int* flag, cudaStream_t stream);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_DEVICE_STALL_KERNEL_H_
