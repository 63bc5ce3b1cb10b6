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
#include "core/kernel_math.h"

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
// the gradient on the way); the grid size depends on n only. A null target
// is zeros.

int MseBlocks(int64_t n) { return BlocksFor(n, /*max_blocks=*/1024); }

template <typename TP, typename TT>
__global__ void MseKernel(const TP* pred, const TT* target, int64_t n,
                          float normalizer, double* partials, TP* dpred) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float d = target == nullptr ? ToFloat(pred[i]) : ToFloat(pred[i]) - ToFloat(target[i]);
    acc += static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = FromFloat<TP>(2.f * d / normalizer);
  }
  acc = BlockAllReduce(acc, SumOp(), 0.0, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// ---------------------------------------------------------------------------
// ColumnSums and ActivationBackwardColumnSums.

// Note [Column sums in chunks]
// A column's sum is taken in a fixed order that depends on the shape alone:
// the rows fall into chunks of kChunkRows (fewer, longer chunks where the
// scratch cannot hold a partial sum per chunk and column); within a chunk,
// warp w adds up rows w, w + kSumWarps, ... in order; the warps' sums are
// added in warp order, then the chunks' in chunk order. One block covers
// kTileColumns columns of one chunk, each thread kColumnsPerThread adjacent
// columns, loaded as one 16-byte vector where the rows allow, which does not
// change what is added in which order. Chunks give a tall matrix blocks
// enough to fill the GPU ([4096, 4096]: 16 x 16 blocks); a second pass adds
// the chunks' partial sums.
constexpr int kColumnsPerThread = 8;
constexpr int kSumWarps = 8;
constexpr int kTileColumns = 32 * kColumnsPerThread;
constexpr int64_t kChunkRows = 256;

__device__ __forceinline__ float ScaledSum(float sum, float alpha, float beta, float old) {
  // beta == 0 must not read `out`: it may hold garbage (NaN * 0 is NaN).
  return beta == 0.f ? alpha * sum : beta * old + alpha * sum;
}

// Loads kColumnsPerThread elements of row r from column c0 (zeros past the
// row's end): one 16-byte vector, or (kVector false) one at a time.
template <bool kVector, typename T>
__device__ __forceinline__ void LoadRowPiece(const T* p, int64_t r, int64_t c0, int64_t cols,
                                             float* v) {
  if constexpr (kVector) {
    if (c0 < cols) {
      LoadVec<kColumnsPerThread>(p + r * cols + c0, 0, v);
    } else {
#pragma unroll
      for (int j = 0; j < kColumnsPerThread; ++j) v[j] = 0.f;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) {
      v[j] = c0 + j < cols ? ToFloat(p[r * cols + c0 + j]) : 0.f;
    }
  }
}

// Stores what LoadRowPiece loads, rounded to T.
template <bool kVector, typename T>
__device__ __forceinline__ void StoreRowPiece(T* p, int64_t r, int64_t c0, int64_t cols,
                                              const float* v) {
  if constexpr (kVector) {
    if (c0 < cols) StoreVec<kColumnsPerThread>(p + r * cols + c0, 0, v);
  } else {
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) {
      if (c0 + j < cols) p[r * cols + c0 + j] = FromFloat<T>(v[j]);
    }
  }
}

// What the column sums add up: the rows of x,
template <typename TX>
struct RowsOf {
  const TX* x;
  template <bool kVector>
  __device__ __forceinline__ void Load(int64_t r, int64_t c0, int64_t cols, float* v) const {
    LoadRowPiece<kVector>(x, r, c0, cols, v);
  }
};

// or the rows of dz = dy * act'(x), stored into dz as they are made; the
// sums add dz as stored (rounded to TG), as ColumnSums of dz would. dz may
// be dy: a thread reads its elements of a row before it writes them.
template <typename TX, typename TG>
struct ActivationGradientRows {
  Activation activation;
  const TX* x;
  const TG* dy;
  TG* dz;
  template <bool kVector>
  __device__ __forceinline__ void Load(int64_t r, int64_t c0, int64_t cols, float* v) const {
    float pre[kColumnsPerThread];
    LoadRowPiece<kVector>(x, r, c0, cols, pre);
    LoadRowPiece<kVector>(dy, r, c0, cols, v);
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) {
      v[j] = ToFloat(FromFloat<TG>(v[j] * kernel_math::ActivateGrad(activation, pre[j])));
    }
    StoreRowPiece<kVector>(dz, r, c0, cols, v);
  }
};

// Sums the chunk blockIdx.y of each column in the block's tile of what
// `rows` loads: into out (scaled) when there is one chunk, else into
// partials[chunk, col].
template <typename Rows, typename TO, bool kVector>
__global__ void ColumnChunkSumsKernel(Rows rows_of, int64_t rows, int64_t cols,
                                      int64_t chunk_rows, float alpha, float beta,
                                      float* partials, TO* out) {
  __shared__ float warp_sums[kSumWarps][kTileColumns];
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kTileColumns;
  const int64_t c0 = tile + lane * kColumnsPerThread;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  float acc[kColumnsPerThread] = {};
#pragma unroll 8
  for (int64_t r = begin + warp; r < end; r += kSumWarps) {
    float v[kColumnsPerThread];
    rows_of.template Load<kVector>(r, c0, cols, v);
#pragma unroll
    for (int j = 0; j < kColumnsPerThread; ++j) acc[j] += v[j];
  }
#pragma unroll
  for (int j = 0; j < kColumnsPerThread; ++j) {
    warp_sums[warp][lane * kColumnsPerThread + j] = acc[j];
  }
  __syncthreads();
  const int t = warp * 32 + lane;  // this thread's column in the tile
  const int64_t c = tile + t;
  if (c >= cols) return;
  float sum = 0.f;
#pragma unroll
  for (int w = 0; w < kSumWarps; ++w) sum += warp_sums[w][t];
  if (gridDim.y == 1) {
    out[c] = FromFloat<TO>(ScaledSum(sum, alpha, beta, beta == 0.f ? 0.f : ToFloat(out[c])));
  } else {
    partials[static_cast<int64_t>(blockIdx.y) * cols + c] = sum;
  }
}

// out[c] from the chunks' partial sums, added in chunk order.
template <typename TO>
__global__ void FinishColumnSumsKernel(const float* partials, int64_t chunks, int64_t cols,
                                       float alpha, float beta, TO* out) {
  const int64_t c = GlobalThread();
  if (c >= cols) return;
  float sum = 0.f;
  for (int64_t k = 0; k < chunks; ++k) sum += partials[k * cols + c];
  out[c] = FromFloat<TO>(ScaledSum(sum, alpha, beta, beta == 0.f ? 0.f : ToFloat(out[c])));
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

namespace {
// Column sums of what `rows_of` loads (Note [Column sums in chunks]); the
// vector path when `vector` (every row piece 16-byte aligned).
template <typename Rows>
void LaunchColumnSums(cudaStream_t stream, const Rows& rows_of, bool vector, int64_t rows,
                      int64_t cols, float alpha, float beta, Ptr out, void* scratch,
                      size_t scratch_bytes) {
  const int64_t tiles = (cols + kTileColumns - 1) / kTileColumns;
  CheckRows("ColumnSums", tiles);
  // Chunks by the shape; one needs no scratch.
  const int64_t fit = std::max<int64_t>(
      1, std::min<int64_t>(static_cast<int64_t>(scratch_bytes / sizeof(float)) / cols, 65535));
  int64_t chunks = std::max<int64_t>(1, (rows + kChunkRows - 1) / kChunkRows);
  int64_t chunk_rows = kChunkRows;
  if (chunks > fit) {  // fewer, longer chunks
    chunks = fit;
    chunk_rows = (rows + chunks - 1) / chunks;
  }
  if (chunks == 1) chunk_rows = rows;
  float* partials = static_cast<float*>(scratch);
  DispatchDType(out.dtype, [&](auto to) {
    using TO = typename decltype(to)::type;
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
    const dim3 block(32, kSumWarps);
    auto* outs = static_cast<TO*>(out.data);
    if (vector) {
      ColumnChunkSumsKernel<Rows, TO, true><<<grid, block, 0, stream>>>(
          rows_of, rows, cols, chunk_rows, alpha, beta, partials, outs);
    } else {
      ColumnChunkSumsKernel<Rows, TO, false><<<grid, block, 0, stream>>>(
          rows_of, rows, cols, chunk_rows, alpha, beta, partials, outs);
    }
    if (chunks > 1) {
      FinishColumnSumsKernel<TO><<<BlocksFor(cols, kMaxBlocks * 16), kThreads, 0, stream>>>(
          partials, chunks, cols, alpha, beta, outs);
    }
  });
}
}  // namespace

void ColumnSums(cudaStream_t stream, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, Ptr out, void* scratch, size_t scratch_bytes) {
  if (cols <= 0) return;
  const bool vector = cols % kColumnsPerThread == 0 && Aligned16(x.data);
  DispatchDType(x.dtype, [&](auto tx) {
    using TX = typename decltype(tx)::type;
    LaunchColumnSums(stream, RowsOf<TX>{static_cast<const TX*>(x.data)}, vector, rows, cols,
                     alpha, beta, out, scratch, scratch_bytes);
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "ColumnSums [" << rows << ", " << cols << "]";
}

void ActivationBackwardColumnSums(cudaStream_t stream, Activation activation, CPtr x,
                                  CPtr dy, Ptr dz, int64_t rows, int64_t cols, float beta,
                                  Ptr sums, void* scratch, size_t scratch_bytes) {
  if (cols <= 0) return;
  CheckOneDType("ActivationBackwardColumnSums", {{"dy", dy}, {"dz", dz}});
  const bool vector = cols % kColumnsPerThread == 0 && Aligned16(x.data) &&
                      Aligned16(dy.data) && Aligned16(dz.data);
  DispatchDType(x.dtype, [&](auto tx) {
    DispatchDType(dy.dtype, [&](auto tg) {
      using TX = typename decltype(tx)::type;
      using TG = typename decltype(tg)::type;
      const ActivationGradientRows<TX, TG> rows_of{activation, static_cast<const TX*>(x.data),
                                                   static_cast<const TG*>(dy.data),
                                                   static_cast<TG*>(dz.data)};
      LaunchColumnSums(stream, rows_of, vector, rows, cols, 1.f, beta, sums, scratch,
                       scratch_bytes);
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "ActivationBackwardColumnSums [" << rows << ", " << cols
                             << "]";
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
