// A GPU lane held still until the test lets it go: a kernel that spins on a
// flag in mapped host memory. Work queued behind it (a collective that
// follows the lane) cannot complete, as if a peer had stalled; Release lets
// it all run.
//
// Launch every kernel the held region queues once before Hold: CUDA loads a
// kernel's module at its first launch, and that waits for the device.
//
//   DeviceStall stall(Device::Cuda(0));
//   stall.Hold(backend.main_lane());
//   ... queue work behind it, watch a watchdog give up ...
//   stall.Release();
#ifndef TANDEM_TESTS_SUPPORT_DEVICE_STALL_H_
#define TANDEM_TESTS_SUPPORT_DEVICE_STALL_H_

#include "core/device.h"
#include "core/lane.h"

namespace tandem {
namespace testing {

class DeviceStall {
 public:
  explicit DeviceStall(Device device);
  // Releases the lanes it holds, then frees the flag once the kernels ended.
  ~DeviceStall();
  DeviceStall(const DeviceStall&) = delete;
  DeviceStall& operator=(const DeviceStall&) = delete;

  // Queues the spinning kernel on `lane` (a lane of the device).
  void Hold(const Lane& lane);
  void Release();

 private:
  Device device_;
  volatile int* flag_ = nullptr;  // mapped host memory: 0 holds, 1 releases
};

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_DEVICE_STALL_H_
