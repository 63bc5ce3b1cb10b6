// parallel/device_communicators.h for builds without CUDA: there are no
// device communicators, and every factory says why. parallel/BUILD chooses
// it where Bazel found no CUDA toolkit; //parallel:no_device_communicators
// builds it everywhere, for its test.
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "parallel/device_communicators.h"

namespace tandem {
namespace {

std::string Why() {
  return "this build has no CUDA (Bazel found no CUDA toolkit when it configured @local_cuda, "
         "or TANDEM_DISABLE_CUDA=1 was set), so it has no device communicators (NCCL): "
         "rebuild where CUDA and NCCL are installed, or run on the CPU (--device=cpu)";
}

}  // namespace

bool DeviceCommunicatorsAvailable(std::string* why) {
  if (why != nullptr) *why = Why();
  return false;
}

std::unique_ptr<DeviceGroup> MakeThreadDeviceGroup(const std::vector<int>& gpus, int comms,
                                                   const DeviceCommOptions& options) {
  throw Error("MakeThreadDeviceGroup: " + Why());
}

std::vector<std::unique_ptr<Communicator>> MakeRankDeviceCommunicators(
    Communicator& host, int gpu, int comms, const DeviceCommOptions& options) {
  throw Error("MakeRankDeviceCommunicators on " + host.Describe() + ": " + Why());
}

}  // namespace tandem
