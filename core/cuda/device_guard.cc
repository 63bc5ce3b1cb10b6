#include "core/cuda/device_guard.h"

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"

namespace tandem {
namespace cuda {

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  CUDA_CHECK(cudaGetDevice(&current));
  // Skipping the set when the device is already current keeps the common
  // case (one thread per GPU) to one cheap query.
  if (current != device) {
    CUDA_CHECK(cudaSetDevice(device)) << "making cuda:" << device << " current";
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) TANDEM_CUDA_LOG_IF_ERROR(cudaSetDevice(previous_));
}

}  // namespace cuda
}  // namespace tandem
