// Launch geometry and grid-stride indexing shared by the CUDA backend's
// kernel files (kernels_elementwise.cu, kernels_reduce.cu). Device code only
// for nvcc; the host launchers' API is core/cuda/kernels.h.
//
//   for (int64_t i = GlobalThread(); i < n; i += GridThreads()) ...
//   MyKernel<<<BlocksFor(n), kThreads, 0, stream>>>(...);
//   TANDEM_CUDA_CHECK_LAUNCH() << "MyKernel (n = " << n << ")";
#ifndef TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_
#define TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tandem {
namespace cuda {
namespace kernels {

inline constexpr int kThreads = 256;
// Grid-stride loops cover the rest; 4096 blocks of 256 threads is several
// waves on any current GPU.
inline constexpr int64_t kMaxBlocks = 4096;

// Blocks of kThreads for `work` grid-stride items: at least 1, at most
// max_blocks.
inline int BlocksFor(int64_t work, int64_t max_blocks = kMaxBlocks) {
  return static_cast<int>(std::min<int64_t>(
      std::max<int64_t>((work + kThreads - 1) / kThreads, 1), max_blocks));
}

// float4 loads and stores need 16-byte aligned addresses.
inline bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_
