#include "core/backend_registry.h"

#include "core/check.h"
#include "core/cpu/cpu_backend.h"
#include "local_cuda/config.h"
#ifdef TANDEM_WITH_CUDA
#include "core/cuda/cuda_backend.h"
#endif

namespace tandem {

namespace {
void CheckAvailable(Device device) {
  if (device.is_cpu()) {
    TANDEM_CHECK(device.index == 0) << "there is one CPU device, got " << device;
    return;
  }
  const int count = CudaDeviceCount();
  TANDEM_CHECK(device.index >= 0 && device.index < count)
      << "device " << device << " is not available: "
      << (count == 0 ? CudaUnavailableReason()
                     : std::to_string(count) + " CUDA device(s) visible");
}
}  // namespace

Backend& GetBackend(Device device) {
  CheckAvailable(device);
  if (device.is_cpu()) {
    static Backend& cpu_context = *cpu::CpuContext();
    return cpu_context;
  }
#ifdef TANDEM_WITH_CUDA
  return cuda::GetCudaBackend(device.index);
#else
  return *cpu::CpuContext();  // not reached: CheckAvailable threw
#endif
}

std::shared_ptr<Backend> SharedBackend(Device device) {
  CheckAvailable(device);
  if (device.is_cpu()) return cpu::CpuContext();
#ifdef TANDEM_WITH_CUDA
  return cuda::SharedCudaBackend(device.index);
#else
  return nullptr;  // not reached: CheckAvailable threw
#endif
}

Lane MainLane(Device device) { return GetBackend(device).main_lane(); }

int CudaDeviceCount() {
#ifdef TANDEM_WITH_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

std::string CudaUnavailableReason() {
#ifdef TANDEM_WITH_CUDA
  return cuda::UnavailableReason();
#else
  // TANDEM_CUDA_WHY_NOT: what Bazel printed when it configured @local_cuda
  // (third_party/cuda_configure.bzl), and what to do.
  return std::string("Tandem was built without CUDA: ") + TANDEM_CUDA_WHY_NOT;
#endif
}

void BindThreadToDevice(Device device) {
  if (device.is_cpu()) return;
#ifdef TANDEM_WITH_CUDA
  GetBackend(device);  // validates the index
  cuda::SetCurrentDevice(device.index);
#else
  GetBackend(device);  // throws: no CUDA in this build
#endif
}

Device ResolveDevice(const std::string& text) {
  if (text == "auto") {
    return CudaDeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu();
  }
  const Device device = ParseDevice(text);
  if (device.is_cuda()) {
    const int count = CudaDeviceCount();
    TANDEM_CHECK(count > 0) << "--device=" << text
                            << " but there are no CUDA devices: "
                            << CudaUnavailableReason()
                            << " (use --device=cpu or --device=auto)";
    TANDEM_CHECK(device.index < count)
        << "--device=" << text << " but only " << count
        << " CUDA device(s) are visible";
  }
  return device;
}

}  // namespace tandem
