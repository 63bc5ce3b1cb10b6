// Row reductions (sum, mean, max, variance) and softmax on the GPU: one
// block per row, threads striding over its columns, float32 accumulators
// combined by block_reduce.cuh in an order fixed by the row length alone,
// so a rerun, or another GPU, gives the same bits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels_math.h"
#include "core/elementwise_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// The maximum that shows a NaN (kernel_math::MaxOrNan); -inf is its
// identity.
struct MaxOrNanOp {
  __device__ float operator()(float a, float b) const { return kernel_math::MaxOrNan(a, b); }
};

// The row's maximum, in every thread of the block.
template <typename T>
__device__ float BlockRowMax(const T* row, int64_t cols, float* shared) {
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    max = kernel_math::MaxOrNan(max, ToFloat(row[c]));
  }
  return BlockAllReduce(max, MaxOrNanOp(), -INFINITY, shared);
}

// The row's sum, in every thread of the block.
template <typename T>
__device__ float BlockRowSum(const T* row, int64_t cols, float* shared) {
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += ToFloat(row[c]);
  return BlockAllReduce(sum, SumOp(), 0.f, shared);
}

template <typename TX, typename TO, RowReduction kOp>
__global__ void RowReduceKernel(const TX* x, int64_t cols, TO* out) {
  __shared__ float shared[32];
  const TX* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float result;
  if constexpr (kOp == RowReduction::kMax) {
    result = BlockRowMax(row, cols, shared);
  } else if constexpr (kOp == RowReduction::kSum) {
    result = BlockRowSum(row, cols, shared);
  } else {
    const float mean = BlockRowSum(row, cols, shared) / static_cast<float>(cols);
    if constexpr (kOp == RowReduction::kMean) {
      result = mean;
    } else {
      // Two passes: squared deviations from the mean, not E[x^2] - mean^2,
      // which loses every digit when the mean is large.
      float squares = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = ToFloat(row[c]) - mean;
        squares += d * d;
      }
      result = BlockAllReduce(squares, SumOp(), 0.f, shared) / static_cast<float>(cols);
    }
  }
  if (threadIdx.x == 0) out[blockIdx.x] = FromFloat<TO>(result);
}

// Each thread reads and writes only its own columns (c = threadIdx.x + k
// blockDim.x), so out may be x.
template <typename T>
__global__ void SoftmaxKernel(const T* x, T* out, int64_t cols) {
  __shared__ float shared[32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * cols;
  const T* row = x + offset;
  T* out_row = out + offset;
  const float max = BlockRowMax(row, cols, shared);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    sum += expf(ToFloat(row[c]) - max);
  }
  sum = BlockAllReduce(sum, SumOp(), 0.f, shared);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out_row[c] = FromFloat<T>(expf(ToFloat(row[c]) - max) / sum);
  }
}

template <typename TX, typename TO>
void LaunchRowReduce(cudaStream_t stream, RowReduction op, const TX* x, int64_t rows,
                     int64_t cols, TO* out) {
  const int blocks = static_cast<int>(rows), threads = RowThreads(cols);
  switch (op) {
    case RowReduction::kSum:
      RowReduceKernel<TX, TO, RowReduction::kSum><<<blocks, threads, 0, stream>>>(x, cols, out);
      return;
    case RowReduction::kMean:
      RowReduceKernel<TX, TO, RowReduction::kMean><<<blocks, threads, 0, stream>>>(x, cols, out);
      return;
    case RowReduction::kMax:
      RowReduceKernel<TX, TO, RowReduction::kMax><<<blocks, threads, 0, stream>>>(x, cols, out);
      return;
    case RowReduction::kVariance:
      RowReduceKernel<TX, TO, RowReduction::kVariance>
          <<<blocks, threads, 0, stream>>>(x, cols, out);
      return;
  }
  TANDEM_CHECK(false) << "unknown row reduction " << static_cast<int>(op);
}

}  // namespace

void RowReduce(cudaStream_t stream, RowReduction op, CPtr x, int64_t rows, int64_t cols,
               Ptr out) {
  if (rows <= 0) return;
  TANDEM_CHECK(cols > 0) << "RowReduce of rows with no columns";
  CheckRows("RowReduce", rows);
  DispatchDType(x.dtype, [&](auto tx) {
    DispatchDType(out.dtype, [&](auto to) {
      using TX = typename decltype(tx)::type;
      using TO = typename decltype(to)::type;
      LaunchRowReduce(stream, op, static_cast<const TX*>(x.data), rows, cols,
                      static_cast<TO*>(out.data));
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "RowReduce [" << rows << ", " << cols << "]";
}

void Softmax(cudaStream_t stream, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  if (rows <= 0) return;
  TANDEM_CHECK(cols > 0) << "Softmax of rows with no columns";
  CheckRows("Softmax", rows);
  CheckOneDType("Softmax", {{"x", x}, {"out", out}});
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SoftmaxKernel<T><<<static_cast<int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x.data), static_cast<T*>(out.data), cols);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "Softmax [" << rows << ", " << cols << "]";
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
