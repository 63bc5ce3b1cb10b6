#include "core/cuda/user_kernels.h"

#include "core/check.h"
#include "core/cuda/cuda_backend.h"

namespace tandem {
namespace cuda {
namespace {

void CheckCudaLane(const Lane& lane) {
  TANDEM_CHECK(lane.valid())
      << "a CUDA kernel was to be launched on no lane (a default-constructed "
         "Lane): pass a lane of the tensor's GPU, x.backend().main_lane()";
  TANDEM_CHECK(lane.device().is_cuda())
      << "a CUDA kernel was to be launched on the " << lane.Describe()
      << ", which has no CUDA stream: launch only for tensors on a GPU (on "
         "the lane x.backend().main_lane()) and compute CPU tensors on the host";
}

}  // namespace

cudaStream_t StreamOf(const Lane& lane) {
  CheckCudaLane(lane);
  return NativeStream(lane);
}

LaneGuard::LaneGuard(const Lane& lane)
    : stream_(StreamOf(lane)), device_(lane.device().index) {}

}  // namespace cuda
}  // namespace tandem
