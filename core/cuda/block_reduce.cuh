// Warp and block reductions of the CUDA backend's row kernels
// (kernels_reduce.cu, kernels_math_rows.cu). Device code for nvcc only.
//
//   __shared__ float shared[32];
//   float sum = 0.f;
//   for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += ToFloat(row[c]);
//   sum = BlockAllReduce(sum, SumOp(), 0.f, shared);   // every thread gets it
//
// The order of operations is fixed by blockDim alone, so a result is
// reproducible bit for bit; launchers pick blockDim from the problem size
// (RowThreads), never from the GPU.
#ifndef TANDEM_CORE_CUDA_BLOCK_REDUCE_CUH_
#define TANDEM_CORE_CUDA_BLOCK_REDUCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "core/check.h"

namespace tandem {
namespace cuda {
namespace kernels {

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ T WarpAllReduce(T value, Op op) {
  // A butterfly: lane l combines with lane l ^ offset, and a + b == b + a in
  // IEEE arithmetic, so all lanes end with the same bits.
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// blockDim.x must be a multiple of 32, at most 1024; `shared` holds 32 T.
template <typename T, typename Op>
__device__ T BlockAllReduce(T value, Op op, T identity, T* shared) {
  value = WarpAllReduce(value, op);
  const int warps = blockDim.x / 32;
  if (warps == 1) return value;
  const int lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[threadIdx.x / 32] = value;
  __syncthreads();
  value = lane < warps ? shared[lane] : identity;
  return WarpAllReduce(value, op);
}

// One block per row: enough threads to cover the row, 32 to 256.
inline int RowThreads(int64_t cols) {
  int threads = 32;
  while (threads < 256 && threads < cols) threads *= 2;
  return threads;
}

// One block per row needs the rows to fit in a grid's x dimension.
inline void CheckRows(const char* op, int64_t rows) {
  TANDEM_CHECK(rows <= std::numeric_limits<int>::max())
      << op << ": " << rows << " rows exceed the CUDA grid limit";
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_BLOCK_REDUCE_CUH_
