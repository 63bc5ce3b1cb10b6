// The CUDA backend: one context per GPU owning its compute stream, cuBLAS
// handle and caching allocator. Only linked when Bazel found a CUDA toolkit.
#ifndef TANDEM_CORE_CUDA_CUDA_BACKEND_H_
#define TANDEM_CORE_CUDA_CUDA_BACKEND_H_

#include <string>

#include "core/backend.h"

namespace tandem {
namespace cuda {

// 0 when the driver or device is missing: any cudaGetDeviceCount error means
// "no CUDA devices" (on a machine without a driver it returns an error).
int DeviceCount();
std::string UnavailableReason();

// The context of GPU `index` (0 <= index < DeviceCount()).
Backend& GetCudaBackend(int index);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CUDA_BACKEND_H_
