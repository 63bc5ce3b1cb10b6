// The CUDA backend: one context per GPU, implementing the op set of
// core/backend.h by queueing kernels and cuBLAS calls on the context's
// compute stream. Only built where Bazel found a CUDA toolkit (core/BUILD's
// if_cuda); most code reaches it through GetBackend(Device::Cuda(i)).
//
//   if (cuda::DeviceCount() > 0) {
//     Backend& gpu = cuda::GetCudaBackend(0);
//     gpu.Fill(1.f, ptr, n);              // queued, returns at once
//     gpu.CopyDeviceToHost(ptr, host, n); // waits for the stream
//   }
//
// Each context owns its device's compute stream (non-blocking), a cuBLAS
// handle bound to it with a 32 MiB workspace, a CachingAllocator and pinned
// staging buffers for host copies. Contexts are created on first use and
// never destroyed (tensors in static storage may free into them at exit).
// Every method makes the context's device current for its duration, so any
// host thread may call any context.
//
// Ordering: everything a context does runs on its one stream, in call order.
// Code that uses another stream (NCCL on a communication stream) orders it
// against ComputeStream(i) with cuda::StreamWaitFor (core/cuda/event.h); see
// Note [Stream-ordered reuse] in core/cuda/caching_allocator.h for what that
// code must keep alive.
//
// Precision: GEMMs are full fp32 by default (no TF32), so results match the
// CPU backend to fp32 rounding. SetAllowTf32(true), or TANDEM_ALLOW_TF32=1 in
// the environment at the first use of CUDA, lets cuBLAS use TF32 tensor cores
// (about 8x the fp32 throughput on H100/H200, 10-bit mantissa inputs).
#ifndef TANDEM_CORE_CUDA_CUDA_BACKEND_H_
#define TANDEM_CORE_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/backend.h"

namespace tandem {
namespace cuda {

// 0 when the driver or device is missing: any cudaGetDeviceCount error means
// "no CUDA devices" (on a machine without a driver it returns an error).
int DeviceCount();
std::string UnavailableReason();

// The context of GPU `index` (0 <= index < DeviceCount()); created on first
// use, thread-safe. Throws tandem::Error for a device that is not there.
Backend& GetCudaBackend(int index);

// Host <-> device copies are staged through pinned buffers of at most this
// many bytes; larger copies go in chunks of this size.
constexpr size_t kStagingChunkBytes = size_t{8} << 20;

// The compute stream of GPU `index`'s context: where all of its ops run.
// For code that orders other streams against it (cuda::StreamWaitFor).
cudaStream_t ComputeStream(int index);

// The side lane's stream of GPU `index`'s context (Backend::BeginSideLane):
// for code that must wait for work a layer put there (the NCCL reducer waits
// for the gradients on both lanes).
cudaStream_t SideLaneStream(int index);

// While one lives, the ops the calling thread queues on GPU `device` go to
// `stream`, after whatever that stream already holds: for work that must
// follow a collective on a communication stream without the compute stream
// waiting (the reducer's per-bucket optimizer update, see
// Reducer::set_optimizer). Element-wise ops only: GEMMs and ops that use
// scratch memory refuse, naming the op. Not while the side lane is open.
class StreamOverride {
 public:
  StreamOverride(int device, cudaStream_t stream);
  ~StreamOverride();
  StreamOverride(const StreamOverride&) = delete;
  StreamOverride& operator=(const StreamOverride&) = delete;

 private:
  int device_;
};

// A TimeMarker (core/backend.h) at the current end of `stream` on GPU
// `device`: a timing event, for traces of streams other than the compute one.
std::unique_ptr<TimeMarker> MarkStream(cudaStream_t stream, int device);

// cudaSetDevice(index) for the calling thread (threads mode binds each
// worker thread to its GPU once).
void SetCurrentDevice(int index);

// Whether cuBLAS may use TF32 tensor cores for fp32 GEMMs, for every context
// (existing and future); takes effect at each context's next Gemm. The
// default is false, or true when TANDEM_ALLOW_TF32=1 is set in the
// environment when this is first consulted.
void SetAllowTf32(bool allow);
bool AllowTf32();

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_CUDA_BACKEND_H_
