// The CUDA backend: one context per GPU (core/cuda/context.h) implementing
// the op set of core/backend.h by queueing kernels and cuBLAS calls on the
// streams of its lanes. Only built where Bazel found a CUDA toolkit
// (core/BUILD's if_cuda); most code reaches it through
// GetBackend(Device::Cuda(i)).
//
//   if (cuda::DeviceCount() > 0) {
//     Backend& gpu = cuda::GetCudaBackend(0);
//     Lane lane = gpu.main_lane();
//     gpu.Fill(lane, 1.f, ptr, n);                    // queued, returns at once
//     gpu.CopyDeviceToHost(lane, ptr, host, bytes);   // waits for the lane
//   }
//
// Each context owns its device's main and side lanes (non-blocking streams,
// each with its own cuBLAS handle and 32 MiB workspace), a CachingAllocator
// and pinned staging buffers for host copies. Contexts are created on first
// use and held by the registry, which lives for the whole process, and by
// every tensor on the device (Note [Context lifetime] in cuda_backend.cc).
// Lanes made with NewLane go with their owners. Every method makes the
// context's device current for its duration, so any host thread may call
// any context.
//
// Precision: GEMMs are full fp32 by default (no TF32), so results match the
// CPU backend to fp32 rounding. SetAllowTf32(true), or TANDEM_ALLOW_TF32=1 in
// the environment at the first use of CUDA, lets cuBLAS use TF32 tensor cores
// (about 8x the fp32 throughput on H100/H200, 10-bit mantissa inputs).
#ifndef TANDEM_CORE_CUDA_CUDA_BACKEND_H_
#define TANDEM_CORE_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "core/backend.h"
#include "core/cuda/tf32.h"  // SetAllowTf32, AllowTf32

namespace tandem {
namespace cuda {

// 0 when the driver or device is missing: any cudaGetDeviceCount error means
// "no CUDA devices" (on a machine without a driver it returns an error).
int DeviceCount();
std::string UnavailableReason();

// The context of GPU `index` (0 <= index < DeviceCount()); created on first
// use, thread-safe. Throws tandem::Error for a device that is not there.
Backend& GetCudaBackend(int index);
std::shared_ptr<Backend> SharedCudaBackend(int index);

// The CUDA stream behind a lane of a GPU context: for code that queues work
// Tandem's ops do not cover (NCCL's collectives, a custom kernel).
cudaStream_t NativeStream(const Lane& lane);

// cudaSetDevice(index) for the calling thread (threads mode binds each
// worker thread to its GPU once).
void SetCurrentDevice(int index);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CUDA_BACKEND_H_
