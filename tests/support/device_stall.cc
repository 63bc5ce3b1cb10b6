#include "tests/support/device_stall.h"

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "tests/support/device_stall_kernel.h"

namespace tandem {
namespace testing {

DeviceStall::DeviceStall(Device device) : device_(device) {
  cuda::DeviceGuard guard(device.index);
  void* host = nullptr;
  CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
  flag_ = static_cast<volatile int*>(host);
  *flag_ = 0;
}

DeviceStall::~DeviceStall() {
  Release();
  // The kernels read the flag until they see it: wait for the device before
  // freeing it (cudaFreeHost waits for nothing). Bounded, in case a kernel
  // never started.
  cuda::DeviceGuard guard(device_.index);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (cudaDeviceSynchronize() == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  TANDEM_CUDA_LOG_IF_ERROR(cudaFreeHost(const_cast<int*>(flag_)));
}

void DeviceStall::Hold(const Lane& lane) {
  cuda::DeviceGuard guard(device_.index);
  int* on_device = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&on_device),
                                      const_cast<int*>(flag_), 0));
  CUDA_CHECK(LaunchSpinUntilReleased(on_device, cuda::NativeStream(lane)));
}

void DeviceStall::Release() {
  *flag_ = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace testing
}  // namespace tandem
