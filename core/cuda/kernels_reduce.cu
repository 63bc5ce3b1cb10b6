// The CUDA backend's reductions: column sums, softmax cross-entropy, MSE,
// argmax and count-correct, and the non-finite loss tracker. Per-row ops
// give each row one block; reductions to one number are two-pass and
// deterministic (see kernels.h). Operands are float32 or bfloat16, loaded
// into float; sums stay in float32 (double where noted), and bfloat16
// gradients are rounded once when stored. The element-wise kernels are in
// kernels_elementwise.cu and kernels_update.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/check.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// Threads of the single block that adds up partial sums.
constexpr int kReduceThreads = 1024;

// The first maximum: a larger value wins, equal values go to the smaller
// index. Threads past the row's end hold (-inf, INT64_MAX), which never wins
// over a real column.
struct ArgmaxPair {
  float value;
  int64_t index;
};

__device__ ArgmaxPair BetterOf(ArgmaxPair a, ArgmaxPair b) {
  if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
  return a;
}

// What a thread holds before it has seen a column.
__device__ __forceinline__ ArgmaxPair NoArgmax() {
  return ArgmaxPair{-INFINITY, std::numeric_limits<int64_t>::max()};
}

// The warp's best pair, in every lane: the butterfly of WarpAllReduce over
// both fields (__shfl_xor_sync moves one scalar at a time).
__device__ __forceinline__ ArgmaxPair WarpArgmax(ArgmaxPair best) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    ArgmaxPair other;
    other.value = __shfl_xor_sync(0xffffffffu, best.value, offset);
    other.index = __shfl_xor_sync(0xffffffffu, best.index, offset);
    best = BetterOf(best, other);
  }
  return best;
}

template <typename T>
__device__ int64_t BlockArgmax(const T* row, int64_t cols, ArgmaxPair* shared) {
  ArgmaxPair best = NoArgmax();
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    best = BetterOf(best, ArgmaxPair{ToFloat(row[c]), c});
  }
  best = WarpArgmax(best);
  const int warps = blockDim.x / 32;
  if (warps == 1) return best.index;
  const int lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = WarpArgmax(lane < warps ? shared[lane] : NoArgmax());
  }
  __syncthreads();
  if (threadIdx.x == 0) shared[0] = best;
  __syncthreads();
  return shared[0].index;
}

// One double per row (at least one), for per-row partials.
size_t PerRowScratchBytes(int64_t rows) {
  return static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(double);
}

// ---------------------------------------------------------------------------
// Row kernels.

template <typename T>
__global__ void SoftmaxCrossEntropyKernel(const T* logits, const float* labels,
                                          int64_t classes, float normalizer,
                                          double* row_loss, T* dlogits) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const int64_t r = blockIdx.x;
  const T* row = logits + r * classes;

  float row_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    row_max = fmaxf(row_max, ToFloat(row[c]));
  }
  row_max = BlockAllReduce(row_max, MaxOp(), -INFINITY, shared_f);

  // Double precision, as the CPU backend: the loss is a difference of two
  // nearly equal numbers when the model is confident.
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    sum += exp(static_cast<double>(ToFloat(row[c]) - row_max));
  }
  sum = BlockAllReduce(sum, SumOp(), 0.0, shared_d);
  const double log_sum = log(sum);

  const float label = labels[r];
  const bool valid = IsIndexBelow(label, classes);
  const int64_t target = valid ? static_cast<int64_t>(label) : -1;
  if (threadIdx.x == 0) {
    row_loss[r] = valid ? log_sum - static_cast<double>(ToFloat(row[target]) - row_max)
                        : static_cast<double>(NAN);
  }
  if (dlogits != nullptr) {
    T* grad = dlogits + r * classes;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const double p = exp(static_cast<double>(ToFloat(row[c]) - row_max) - log_sum);
      grad[c] = FromFloat<T>(
          valid ? static_cast<float>((p - (c == target ? 1.0 : 0.0)) / normalizer)
                : NAN);
    }
  }
}

template <typename T>
__global__ void ArgmaxKernel(const T* x, int64_t cols, float* out) {
  __shared__ ArgmaxPair shared[32];
  const int64_t r = blockIdx.x;
  const int64_t index = BlockArgmax(x + r * cols, cols, shared);
  if (threadIdx.x == 0) out[r] = static_cast<float>(index);
}

template <typename T>
__global__ void CorrectKernel(const T* logits, const float* labels,
                              int64_t classes, double* correct) {
  __shared__ ArgmaxPair shared[32];
  const int64_t r = blockIdx.x;
  const int64_t index = BlockArgmax(logits + r * classes, classes, shared);
  if (threadIdx.x == 0) {
    const float label = labels[r];
    correct[r] = !IsIndexBelow(label, classes)
                     ? static_cast<double>(NAN)
                     : (static_cast<int64_t>(label) == index ? 1.0 : 0.0);
  }
}

// out[0] = (sum of values[0, n)) / divisor, by one block in a fixed order.
__global__ void SumToScalarKernel(const double* values, int64_t n,
                                  double divisor, float* out) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += values[i];
  acc = BlockAllReduce(acc, SumOp(), 0.0, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(acc / divisor);
}

void LaunchSumToScalar(cudaStream_t stream, const double* values, int64_t n,
                       double divisor, float* out, const char* op) {
  SumToScalarKernel<<<1, kReduceThreads, 0, stream>>>(values, n, divisor, out);
  TANDEM_CUDA_CHECK_LAUNCH() << op << " (final sum of " << n << " partials)";
}

// ---------------------------------------------------------------------------
// Mse: each block sums its grid-stride share of squared errors (and writes
// the gradient on the way); the grid size depends on n only.

int MseBlocks(int64_t n) { return BlocksFor(n, /*max_blocks=*/1024); }

template <typename TP, typename TT>
__global__ void MseKernel(const TP* pred, const TT* target, int64_t n,
                          float normalizer, double* partials, TP* dpred) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float d = ToFloat(pred[i]) - ToFloat(target[i]);
    acc += static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = FromFloat<TP>(2.f * d / normalizer);
  }
  acc = BlockAllReduce(acc, SumOp(), 0.0, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// ---------------------------------------------------------------------------
// ColumnSums: a block owns 32 columns; its 16 rows of threads each sum every
// 16th row, then one thread per column adds the 16 partial sums in order.

constexpr int kColumnTile = 32;
constexpr int kRowPhases = 16;

template <typename TX, typename TO>
__global__ void ColumnSumsKernel(const TX* x, int64_t rows, int64_t cols,
                                 float alpha, float beta, TO* out) {
  __shared__ float partial[kRowPhases][kColumnTile + 1];
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  float acc = 0.f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowPhases) {
      acc += ToFloat(x[r * cols + c]);
    }
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kRowPhases; ++k) sum += partial[k][threadIdx.x];
    // beta == 0 must not read `out`: it may hold garbage (NaN * 0 is NaN).
    out[c] = FromFloat<TO>(beta == 0.f ? alpha * sum
                                       : beta * ToFloat(out[c]) + alpha * sum);
  }
}

// Records the first step whose loss is NaN or infinite (first_bad < 0: none
// yet).
__global__ void TrackNonFiniteKernel(const float* loss, float step,
                                     float* first_bad) {
  if (!isfinite(loss[0]) && first_bad[0] < 0.f) first_bad[0] = step;
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

void ColumnSums(cudaStream_t stream, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, Ptr out) {
  if (cols <= 0) return;
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  CheckRows("ColumnSums", tiles);
  DispatchDType(x.dtype, [&](auto tx) {
    DispatchDType(out.dtype, [&](auto to) {
      using TX = typename decltype(tx)::type;
      using TO = typename decltype(to)::type;
      ColumnSumsKernel<TX, TO>
          <<<static_cast<int>(tiles), dim3(kColumnTile, kRowPhases), 0, stream>>>(
              static_cast<const TX*>(x.data), rows, cols, alpha, beta,
              static_cast<TO*>(out.data));
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "ColumnSums [" << rows << ", " << cols << "]";
}

void TrackNonFinite(cudaStream_t stream, const float* loss, int64_t step,
                    float* first_bad) {
  TrackNonFiniteKernel<<<1, 1, 0, stream>>>(loss, static_cast<float>(step),
                                            first_bad);
  TANDEM_CUDA_CHECK_LAUNCH() << "TrackNonFinite";
}

size_t SoftmaxCrossEntropyScratchBytes(int64_t rows) {
  return PerRowScratchBytes(rows);
}

void SoftmaxCrossEntropy(cudaStream_t stream, CPtr logits, const float* labels,
                         int64_t rows, int64_t classes, float normalizer, void* scratch,
                         float* loss, Ptr dlogits) {
  if (rows <= 0) return;
  CheckRows("SoftmaxCrossEntropy", rows);
  CheckOneDType("SoftmaxCrossEntropy", {{"logits", logits}, {"dlogits", dlogits}});
  double* row_loss = static_cast<double*>(scratch);
  DispatchDType(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SoftmaxCrossEntropyKernel<T><<<static_cast<int>(rows), RowThreads(classes), 0, stream>>>(
        static_cast<const T*>(logits.data), labels, classes, normalizer, row_loss,
        static_cast<T*>(dlogits.data));
  });
  TANDEM_CUDA_CHECK_LAUNCH()
      << "SoftmaxCrossEntropy [" << rows << ", " << classes << "]";
  LaunchSumToScalar(stream, row_loss, rows, normalizer, loss,
                    "SoftmaxCrossEntropy");
}

size_t MseScratchBytes(int64_t n) {
  return static_cast<size_t>(MseBlocks(n)) * sizeof(double);
}

void Mse(cudaStream_t stream, CPtr pred, CPtr target, int64_t n, float normalizer,
         void* scratch, float* loss, Ptr dpred) {
  if (n <= 0) return;
  CheckOneDType("Mse", {{"pred", pred}, {"dpred", dpred}});
  const int blocks = MseBlocks(n);
  double* partials = static_cast<double*>(scratch);
  DispatchDType(pred.dtype, [&](auto tp) {
    DispatchDType(target.dtype, [&](auto tt) {
      using TP = typename decltype(tp)::type;
      using TT = typename decltype(tt)::type;
      MseKernel<TP, TT><<<blocks, kThreads, 0, stream>>>(
          static_cast<const TP*>(pred.data), static_cast<const TT*>(target.data), n,
          normalizer, partials, static_cast<TP*>(dpred.data));
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "Mse (n = " << n << ")";
  LaunchSumToScalar(stream, partials, blocks, normalizer, loss, "Mse");
}

void Argmax(cudaStream_t stream, CPtr x, int64_t rows, int64_t cols, float* out) {
  if (rows <= 0) return;
  CheckRows("Argmax", rows);
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ArgmaxKernel<T><<<static_cast<int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x.data), cols, out);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "Argmax [" << rows << ", " << cols << "]";
}

size_t CountCorrectScratchBytes(int64_t rows) {
  return PerRowScratchBytes(rows);
}

void CountCorrect(cudaStream_t stream, CPtr logits, const float* labels, int64_t rows,
                  int64_t classes, void* scratch, float* out) {
  if (rows <= 0) return;
  CheckRows("CountCorrect", rows);
  double* correct = static_cast<double*>(scratch);
  DispatchDType(logits.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CorrectKernel<T><<<static_cast<int>(rows), RowThreads(classes), 0, stream>>>(
        static_cast<const T*>(logits.data), labels, classes, correct);
  });
  TANDEM_CUDA_CHECK_LAUNCH()
      << "CountCorrect [" << rows << ", " << classes << "]";
  LaunchSumToScalar(stream, correct, rows, 1.0, out, "CountCorrect");
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
