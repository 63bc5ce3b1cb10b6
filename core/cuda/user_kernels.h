// Running your own CUDA kernel from a layer: the stream of a lane, the
// device guard a launch needs, and the launch checks (core/cuda/cuda_check.h).
//
// Tandem's ops are queued on lanes (core/lane.h); on a GPU a lane is a CUDA
// stream. A kernel of your own goes on the stream of the lane the
// surrounding ops use (usually the main lane of the tensor's device), so it
// runs after the work queued there before it and before the work queued
// after it, with no host wait and no extra synchronisation:
//
//   // In a .cc file compiled only where Bazel found CUDA (if_cuda).
//   Lane lane = x.backend().main_lane();
//   cuda::LaneGuard on(lane);              // the lane's GPU is current
//   CUDA_CHECK(LaunchMyKernel(x.data(), y.mutable_data(), x.numel(), on.stream()))
//       << "layer '" << name_ << "'";
//
// where LaunchMyKernel (in a .cu file) launches with `<<<grid, block, 0,
// stream>>>` and returns cudaGetLastError(); or launch here and follow it
// with TANDEM_CUDA_CHECK_LAUNCH() << "MyKernel". A failed launch then throws
// tandem::Error at the launch, naming the kernel and the CUDA error.
//
// The target is //core/cuda:user_kernels, defined only where Bazel found a
// CUDA toolkit: depend on it through if_cuda() (docs/custom_layers.md).
#ifndef TANDEM_CORE_CUDA_USER_KERNELS_H_
#define TANDEM_CORE_CUDA_USER_KERNELS_H_

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"    // CUDA_CHECK, TANDEM_CUDA_CHECK_LAUNCH
#include "core/cuda/device_guard.h"  // DeviceGuard
#include "core/lane.h"

namespace tandem {
namespace cuda {

// The CUDA stream behind `lane`, owned by the lane: valid while the lane is.
// Throws tandem::Error naming the lane and its device when it is not a lane
// of a CUDA device (a CPU lane, or no lane).
cudaStream_t StreamOf(const Lane& lane);

// For the scope of a launch: makes the lane's GPU the current device (a
// kernel must be launched with its stream's device current; the calling
// thread may be driving another GPU) and restores the previous one after.
// Throws as StreamOf does.
class LaneGuard {
 public:
  explicit LaneGuard(const Lane& lane);

  LaneGuard(const LaneGuard&) = delete;
  LaneGuard& operator=(const LaneGuard&) = delete;

  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
  DeviceGuard device_;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_USER_KERNELS_H_
