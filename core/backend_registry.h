// Finds the execution context (Backend) of a device.
//
//   Backend& cpu = GetBackend(Device::Cpu());
//   if (CudaDeviceCount() > 0) GetBackend(Device::Cuda(0)).Synchronize();
//
// Contexts are created on first use, one per device, shared by every thread
// that uses the device. The registry and every tensor's storage hold a share
// of their device's context, so a context outlives every tensor made on it;
// the registry lives for the whole process.
#ifndef TANDEM_CORE_BACKEND_REGISTRY_H_
#define TANDEM_CORE_BACKEND_REGISTRY_H_

#include <memory>
#include <string>

#include "core/backend.h"

namespace tandem {

// Throws a clear error for a device that is not there (cuda:0 on a machine
// without a GPU, or a build without CUDA).
Backend& GetBackend(Device device);
// The same context, shared: what a Storage keeps so that its device's
// allocator outlives it.
std::shared_ptr<Backend> SharedBackend(Device device);
// The main lane of `device`'s context: where ops go when a call names no
// lane (core/lane.h).
Lane MainLane(Device device);

// Number of usable CUDA devices: 0 when Tandem was built without CUDA, or
// when the driver or device is missing (any cudaGetDeviceCount error).
int CudaDeviceCount();
// Why CudaDeviceCount() is 0, for messages and test skips; "" when it isn't.
std::string CudaUnavailableReason();

// Makes `device` the calling thread's current device (cudaSetDevice for a
// GPU; nothing for the CPU). Threads mode calls it once per worker thread.
void BindThreadToDevice(Device device);

// Resolves "auto" to cuda:0 when a GPU is present and cpu otherwise, and
// checks that an explicit CUDA device exists (naming the flag's value).
Device ResolveDevice(const std::string& text);

}  // namespace tandem

#endif  // TANDEM_CORE_BACKEND_REGISTRY_H_
