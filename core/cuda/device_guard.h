// DeviceGuard: makes a GPU current for a scope and restores the previous one.
// CUDA's current device is per host thread; every entry point of a device's
// context takes a guard first, so a thread that drives two GPUs (or calls in
// with another device current) still launches on the right one.
//
//   {
//     cuda::DeviceGuard guard(1);   // cudaSetDevice(1)
//     CUDA_CHECK(cudaMalloc(&p, bytes));
//   }                               // the previous device is current again
#ifndef TANDEM_CORE_CUDA_DEVICE_GUARD_H_
#define TANDEM_CORE_CUDA_DEVICE_GUARD_H_

namespace tandem {
namespace cuda {

class DeviceGuard {
 public:
  // Throws tandem::Error if the device cannot be made current.
  explicit DeviceGuard(int device);
  // Restores the previous device; never throws (logs a failure).
  ~DeviceGuard();

  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: the guard did not change the device
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_DEVICE_GUARD_H_
