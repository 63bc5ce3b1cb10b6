// Fused layer normalisation on the GPU: the forward pass and the input
// gradient take one block per row (threads striding over its columns,
// float32 accumulators combined by block_reduce.cuh), and the weight and
// bias gradients one kernel of column sums. Every sum runs in an order fixed
// by the shape alone, so a rerun, or another GPU, gives the same bits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels_layer_norm.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// Per row: the mean, then the variance as squared deviations from it (two
// passes, not E[x^2] - mean^2, which loses every digit when the mean is
// large), then y. Each thread reads x[c] and writes y[c] for its own
// columns only.
template <typename T>
__global__ void LayerNormForwardKernel(const T* x, const T* weight, const T* bias, float eps,
                                       int64_t cols, T* y, float* mean, float* rstd) {
  __shared__ float shared[32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * cols;
  const T* row = x + offset;
  const float n = static_cast<float>(cols);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += ToFloat(row[c]);
  const float m = BlockAllReduce(sum, SumOp(), 0.f, shared) / n;
  float squares = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = ToFloat(row[c]) - m;
    squares += d * d;
  }
  const float s = 1.f / sqrtf(BlockAllReduce(squares, SumOp(), 0.f, shared) / n + eps);
  T* out = y + offset;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = FromFloat<T>((ToFloat(row[c]) - m) * s * ToFloat(weight[c]) + ToFloat(bias[c]));
  }
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = s;
  }
}

// Per row, with g = dy * weight and xhat = (x - mean) rstd:
// dx = rstd (g - mean(g) - xhat mean(g xhat)).
template <typename T>
__global__ void LayerNormInputGradKernel(const T* x, const T* dy, const T* weight,
                                         const float* mean, const float* rstd, int64_t cols,
                                         T* dx) {
  __shared__ float shared[32];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * cols;
  const T* xr = x + offset;
  const T* dyr = dy + offset;
  const float m = mean[blockIdx.x], s = rstd[blockIdx.x];
  const float n = static_cast<float>(cols);
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = ToFloat(dyr[c]) * ToFloat(weight[c]);
    sum_g += g;
    sum_gx += g * ((ToFloat(xr[c]) - m) * s);
  }
  const float mean_g = BlockAllReduce(sum_g, SumOp(), 0.f, shared) / n;
  const float mean_gx = BlockAllReduce(sum_gx, SumOp(), 0.f, shared) / n;
  T* out = dx + offset;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = ToFloat(dyr[c]) * ToFloat(weight[c]);
    const float xhat = (ToFloat(xr[c]) - m) * s;
    out[c] = FromFloat<T>(s * (g - mean_g - xhat * mean_gx));
  }
}

// The weight and bias gradients: a block of kColumns x kRowGroups threads
// sums kColumns adjacent columns (a warp reads consecutive elements of a
// row), thread (tx, ty) the rows ty, ty + kRowGroups, ...; the kRowGroups
// partial sums are then added in order by the threads of row group 0, and
// onto the old gradient. No atomics: the same bits on every run.
constexpr int kColumns = 32;
constexpr int kRowGroups = 16;

template <typename T>
__global__ void LayerNormParamGradKernel(const T* x, const T* dy, const float* mean,
                                         const float* rstd, int64_t rows, int64_t cols,
                                         float* dweight, float* dbias) {
  __shared__ float partial_w[kRowGroups][kColumns];
  __shared__ float partial_b[kRowGroups][kColumns];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  float w = 0.f, b = 0.f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowGroups) {
      const float g = ToFloat(dy[r * cols + c]);
      w += g * ((ToFloat(x[r * cols + c]) - mean[r]) * rstd[r]);
      b += g;
    }
  }
  partial_w[threadIdx.y][threadIdx.x] = w;
  partial_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total_w = 0.f, total_b = 0.f;
  for (int k = 0; k < kRowGroups; ++k) {
    total_w += partial_w[k][threadIdx.x];
    total_b += partial_b[k][threadIdx.x];
  }
  if (dweight != nullptr) dweight[c] += total_w;
  if (dbias != nullptr) dbias[c] += total_b;
}

}  // namespace

void LayerNormForward(cudaStream_t stream, CPtr x, CPtr weight, CPtr bias, float eps,
                      int64_t rows, int64_t cols, Ptr y, float* mean, float* rstd) {
  if (rows <= 0) return;
  TANDEM_CHECK(cols > 0) << "LayerNormForward of rows with no columns";
  CheckRows("LayerNormForward", rows);
  CheckOneDType("LayerNormForward", {{"x", x}, {"weight", weight}, {"bias", bias}, {"y", y}});
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LayerNormForwardKernel<T><<<static_cast<int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x.data), static_cast<const T*>(weight.data),
        static_cast<const T*>(bias.data), eps, cols, static_cast<T*>(y.data), mean, rstd);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "LayerNormForward [" << rows << ", " << cols << "]";
}

void LayerNormBackward(cudaStream_t stream, CPtr x, CPtr dy, CPtr weight,
                       const float* mean, const float* rstd, int64_t rows, int64_t cols,
                       Ptr dx, float* dweight, float* dbias) {
  if (rows <= 0) return;
  TANDEM_CHECK(cols > 0) << "LayerNormBackward of rows with no columns";
  CheckRows("LayerNormBackward", rows);
  CheckOneDType("LayerNormBackward",
                {{"x", x}, {"dy", dy}, {"weight", weight}, {"dx", dx}});
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x.data);
    const T* dys = static_cast<const T*>(dy.data);
    if (dweight != nullptr || dbias != nullptr) {
      const int blocks = static_cast<int>((cols + kColumns - 1) / kColumns);
      LayerNormParamGradKernel<T><<<blocks, dim3(kColumns, kRowGroups), 0, stream>>>(
          xs, dys, mean, rstd, rows, cols, dweight, dbias);
    }
    if (dx.data != nullptr) {
      LayerNormInputGradKernel<T><<<static_cast<int>(rows), RowThreads(cols), 0, stream>>>(
          xs, dys, static_cast<const T*>(weight.data), mean, rstd, cols,
          static_cast<T*>(dx.data));
    }
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "LayerNormBackward [" << rows << ", " << cols << "]";
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
