#include "core/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <mutex>

#include "core/check.h"

namespace tandem {
namespace cuda {
namespace {

struct Availability {
  int count = 0;
  std::string why_not;
};

const Availability& Probe() {
  static const Availability availability = [] {
    Availability a;
    const cudaError_t status = cudaGetDeviceCount(&a.count);
    if (status != cudaSuccess) {
      a.count = 0;
      a.why_not = std::string("no CUDA devices (cudaGetDeviceCount: ") +
                  cudaGetErrorString(status) + ")";
      cudaGetLastError();  // clear the sticky error for later calls
    } else if (a.count == 0) {
      a.why_not = "no CUDA devices (cudaGetDeviceCount returned 0)";
    }
    return a;
  }();
  return availability;
}

}  // namespace

int DeviceCount() { return Probe().count; }
std::string UnavailableReason() { return Probe().why_not; }

Backend& GetCudaBackend(int index) {
  TANDEM_CHECK(false) << "the CUDA backend is under construction";
  throw;
}

}  // namespace cuda
}  // namespace tandem
