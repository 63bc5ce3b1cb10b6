// The causal softmax of attention scores and its gradient, one block per
// row (threads striding over its columns, float32 sums combined by
// block_reduce.cuh in an order fixed by the row length alone, so a rerun
// gives the same bits), and the transpose of a batch of matrices.
//
// Products that the CPU backend rounds separately are kept apart here too
// (__fmul_rn: nvcc would otherwise fuse a product and the sum after it into
// one FMA), so both backends compute the same float32 expressions.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels_attention.h"
#include "core/elementwise_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// The maximum that shows a NaN (kernel_math::MaxOrNan); -inf is its identity.
struct MaxOrNanOp {
  __device__ float operator()(float a, float b) const { return kernel_math::MaxOrNan(a, b); }
};

// Block r is row i = r % t of its matrix, which sees columns 0..i. Each
// thread reads and writes only its own columns (c = threadIdx.x + k
// blockDim.x), so out may be x.
template <typename T>
__global__ void CausalSoftmaxKernel(const T* x, T* out, int64_t t, float scale) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const int64_t seen = r % t + 1;
  const T* row = x + r * t;
  T* out_row = out + r * t;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < seen; c += blockDim.x) {
    max = kernel_math::MaxOrNan(max, __fmul_rn(scale, ToFloat(row[c])));
  }
  max = BlockAllReduce(max, MaxOrNanOp(), -INFINITY, shared);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < seen; c += blockDim.x) {
    sum += expf(__fmul_rn(scale, ToFloat(row[c])) - max);
  }
  sum = BlockAllReduce(sum, SumOp(), 0.f, shared);
  for (int64_t c = threadIdx.x; c < t; c += blockDim.x) {
    out_row[c] = FromFloat<T>(c < seen ? expf(__fmul_rn(scale, ToFloat(row[c])) - max) / sum : 0.f);
  }
}

// dx = scale y (dy - sum dy y) over the seen columns, 0 past them; each
// thread reads y[c] and dy[c] before it writes dx[c], for its own columns.
template <typename T>
__global__ void CausalSoftmaxBackwardKernel(const T* y, const T* dy, T* dx, int64_t t,
                                            float scale) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const int64_t seen = r % t + 1;
  const int64_t offset = r * t;
  float dot = 0.f;
  for (int64_t c = threadIdx.x; c < seen; c += blockDim.x) {
    dot += __fmul_rn(ToFloat(dy[offset + c]), ToFloat(y[offset + c]));
  }
  dot = BlockAllReduce(dot, SumOp(), 0.f, shared);
  for (int64_t c = threadIdx.x; c < t; c += blockDim.x) {
    float g = 0.f;
    if (c < seen) {
      g = __fmul_rn(scale, __fmul_rn(ToFloat(y[offset + c]), ToFloat(dy[offset + c]) - dot));
    }
    dx[offset + c] = FromFloat<T>(g);
  }
}

// Grid dimensions past this go round in grid-stride loops (65535 is the
// limit of gridDim.y and gridDim.z).
constexpr int64_t kMaxGrid = 65535;
constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim.y; each thread moves kTile / kTileRows

// A block moves 32 x 32 tiles of one matrix at a time, read along rows of x
// and written along rows of out, through shared memory (a padding column
// keeps the column reads free of bank conflicts); elements as raw bits.
template <typename Bits>
__global__ void TransposeBatchedKernel(const Bits* x, Bits* out, int64_t batch, int64_t rows,
                                       int64_t cols) {
  __shared__ Bits tile[kTile][kTile + 1];
  const int64_t tile_rows = (rows + kTile - 1) / kTile;
  const int64_t tile_cols = (cols + kTile - 1) / kTile;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const Bits* xb = x + b * rows * cols;
    Bits* ob = out + b * rows * cols;
    for (int64_t tr = blockIdx.y; tr < tile_rows; tr += gridDim.y) {
      for (int64_t tc = blockIdx.x; tc < tile_cols; tc += gridDim.x) {
        const int64_t c = tc * kTile + threadIdx.x;
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t r = tr * kTile + j;
          if (r < rows && c < cols) tile[j][threadIdx.x] = xb[r * cols + c];
        }
        __syncthreads();
        const int64_t out_c = tr * kTile + threadIdx.x;
        for (int j = threadIdx.y; j < kTile; j += kTileRows) {
          const int64_t out_r = tc * kTile + j;
          if (out_r < cols && out_c < rows) ob[out_r * rows + out_c] = tile[threadIdx.x][j];
        }
        __syncthreads();  // the tile is rewritten by the next round
      }
    }
  }
}

// out's element e is x's element at e's index mapped through the spec:
// out dimension i is x dimension perm[i].
template <typename Bits>
__global__ void PermuteKernel(const Bits* x, Bits* out, int64_t n, PermuteSpec spec) {
  int64_t in_stride[PermuteSpec::kMaxRank];
  int64_t stride = 1;
  for (int d = spec.rank - 1; d >= 0; --d) {
    in_stride[d] = stride;
    stride *= spec.in_shape[d];
  }
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = e, from = 0;
    for (int i = spec.rank - 1; i >= 0; --i) {
      const int64_t size = spec.in_shape[spec.perm[i]];
      from += (rest % size) * in_stride[spec.perm[i]];
      rest /= size;
    }
    out[e] = x[from];
  }
}

template <typename Bits>
__global__ void MaskedFillKernel(const Bits* x, const float* mask, int64_t n, int64_t mask_n,
                                 Bits fill, Bits* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = mask[i % mask_n] != 0.f ? fill : x[i];
  }
}

}  // namespace

void CausalSoftmax(cudaStream_t stream, CPtr x, Ptr out, int64_t batch, int64_t t, float scale) {
  if (batch <= 0 || t <= 0) return;
  CheckRows("CausalSoftmax", batch * t);
  CheckOneDType("CausalSoftmax", {{"x", x}, {"out", out}});
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CausalSoftmaxKernel<T><<<static_cast<int>(batch * t), RowThreads(t), 0, stream>>>(
        static_cast<const T*>(x.data), static_cast<T*>(out.data), t, scale);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "CausalSoftmax [" << batch << ", " << t << ", " << t << "]";
}

void CausalSoftmaxBackward(cudaStream_t stream, CPtr y, CPtr dy, Ptr dx, int64_t batch, int64_t t,
                           float scale) {
  if (batch <= 0 || t <= 0) return;
  CheckRows("CausalSoftmaxBackward", batch * t);
  CheckOneDType("CausalSoftmaxBackward", {{"y", y}, {"dy", dy}, {"dx", dx}});
  DispatchDType(y.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CausalSoftmaxBackwardKernel<T><<<static_cast<int>(batch * t), RowThreads(t), 0, stream>>>(
        static_cast<const T*>(y.data), static_cast<const T*>(dy.data), static_cast<T*>(dx.data), t,
        scale);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "CausalSoftmaxBackward [" << batch << ", " << t << ", " << t << "]";
}

void TransposeBatched(cudaStream_t stream, CPtr x, Ptr out, int64_t batch, int64_t rows,
                      int64_t cols) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return;
  CheckOneDType("TransposeBatched", {{"x", x}, {"out", out}});
  const dim3 grid(static_cast<unsigned>(std::min((cols + kTile - 1) / kTile, kMaxGrid)),
                  static_cast<unsigned>(std::min((rows + kTile - 1) / kTile, kMaxGrid)),
                  static_cast<unsigned>(std::min(batch, kMaxGrid)));
  const dim3 block(kTile, kTileRows);
  if (SizeOf(x.dtype) == 4) {
    TransposeBatchedKernel<uint32_t><<<grid, block, 0, stream>>>(
        static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(out.data), batch, rows, cols);
  } else {
    TransposeBatchedKernel<uint16_t><<<grid, block, 0, stream>>>(
        static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(out.data), batch, rows, cols);
  }
  TANDEM_CUDA_CHECK_LAUNCH() << "TransposeBatched [" << batch << ", " << rows << ", " << cols
                             << "] " << DTypeName(x.dtype);
}

void Permute(cudaStream_t stream, CPtr x, Ptr out, const PermuteSpec& spec) {
  int64_t n = 1;
  for (int d = 0; d < spec.rank; ++d) n *= spec.in_shape[d];
  if (n <= 0) return;
  CheckOneDType("Permute", {{"x", x}, {"out", out}});
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxGrid));
  if (SizeOf(x.dtype) == 4) {
    PermuteKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(out.data), n, spec);
  } else {
    PermuteKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(out.data), n, spec);
  }
  TANDEM_CUDA_CHECK_LAUNCH() << "Permute of " << n << " " << DTypeName(x.dtype) << " elements";
}

void MaskedFill(cudaStream_t stream, CPtr x, const float* mask, int64_t n, int64_t mask_n,
                float fill, Ptr out) {
  if (n <= 0) return;
  CheckOneDType("MaskedFill", {{"x", x}, {"out", out}});
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxGrid));
  if (SizeOf(x.dtype) == 4) {
    uint32_t bits;
    std::memcpy(&bits, &fill, sizeof(bits));
    MaskedFillKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(x.data), mask, n, mask_n, bits,
        static_cast<uint32_t*>(out.data));
  } else {
    MaskedFillKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x.data), mask, n, mask_n, FloatToBFloat16Bits(fill),
        static_cast<uint16_t*>(out.data));
  }
  TANDEM_CUDA_CHECK_LAUNCH() << "MaskedFill of " << n << " " << DTypeName(x.dtype)
                             << " elements, mask of " << mask_n;
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
