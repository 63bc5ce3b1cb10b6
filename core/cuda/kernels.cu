// The CUDA backend's kernels. Elementwise ops share one grid-stride "map"
// kernel (float4 loads and stores when every pointer is 16-byte aligned);
// per-row ops give each row one block; reductions are two-pass and
// deterministic (see kernels.h).
#include "core/cuda/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover the rest; 4096 blocks of 256 threads is several
// waves on any current GPU.
constexpr int64_t kMaxBlocks = 4096;
// Threads of the single block that adds up partial sums.
constexpr int kReduceThreads = 1024;

int BlocksFor(int64_t work) {
  return static_cast<int>(std::min<int64_t>(
      std::max<int64_t>((work + kThreads - 1) / kThreads, 1), kMaxBlocks));
}

bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---------------------------------------------------------------------------
// Elementwise map.
//
// A map has kN float slots per element; bit j of kRead says slot j is loaded
// before the functor runs, bit j of kWrite that it is stored after. The
// functor gets the element index and the slot values: f(i, v). Slots that
// alias (x == out) are fine: each element is loaded before it is stored.

template <int kN>
struct Slots {
  float* p[kN];
};

template <int kN, unsigned kRead, unsigned kWrite, typename F>
__global__ void MapKernel(Slots<kN> s, int64_t n, F f) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    float v[kN] = {};
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kRead >> j) & 1u) v[j] = s.p[j][i];
    }
    f(i, v);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kWrite >> j) & 1u) s.p[j][i] = v[j];
    }
  }
}

// The same map, four elements per step with float4 memory operations; the
// last n % 4 elements go through the scalar path.
template <int kN, unsigned kRead, unsigned kWrite, typename F>
__global__ void MapVec4Kernel(Slots<kN> s, int64_t n, F f) {
  const int64_t n4 = n / 4;
  for (int64_t q = GlobalThread(); q < n4; q += GridThreads()) {
    float a[kN][4] = {};
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kRead >> j) & 1u) {
        const float4 t = reinterpret_cast<const float4*>(s.p[j])[q];
        a[j][0] = t.x;
        a[j][1] = t.y;
        a[j][2] = t.z;
        a[j][3] = t.w;
      }
    }
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      float v[kN];
#pragma unroll
      for (int j = 0; j < kN; ++j) v[j] = a[j][lane];
      f(4 * q + lane, v);
#pragma unroll
      for (int j = 0; j < kN; ++j) a[j][lane] = v[j];
    }
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kWrite >> j) & 1u) {
        reinterpret_cast<float4*>(s.p[j])[q] =
            make_float4(a[j][0], a[j][1], a[j][2], a[j][3]);
      }
    }
  }
  for (int64_t i = 4 * n4 + GlobalThread(); i < n; i += GridThreads()) {
    float v[kN] = {};
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kRead >> j) & 1u) v[j] = s.p[j][i];
    }
    f(i, v);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      if ((kWrite >> j) & 1u) s.p[j][i] = v[j];
    }
  }
}

template <unsigned kRead, unsigned kWrite, int kN, typename F>
void LaunchMap(cudaStream_t stream, const char* name, Slots<kN> s, int64_t n,
               F f) {
  if (n <= 0) return;
  bool aligned = true;
  for (int j = 0; j < kN; ++j) aligned = aligned && Aligned16(s.p[j]);
  if (aligned && n >= 4) {
    MapVec4Kernel<kN, kRead, kWrite, F>
        <<<BlocksFor(n / 4), kThreads, 0, stream>>>(s, n, f);
  } else {
    MapKernel<kN, kRead, kWrite, F>
        <<<BlocksFor(n), kThreads, 0, stream>>>(s, n, f);
  }
  TANDEM_CUDA_CHECK_LAUNCH() << name << " (n = " << n << ")";
}

// Slots hold float*; inputs are only read (kRead without kWrite).
float* In(const float* p) { return const_cast<float*>(p); }

// Calls fn(std::integral_constant<Activation, a>()), so kernels are compiled
// once per activation and kernel_math's switch folds away.
template <typename Fn>
void DispatchActivation(Activation a, Fn&& fn) {
  switch (a) {
    case Activation::kIdentity:
      fn(std::integral_constant<Activation, Activation::kIdentity>());
      return;
    case Activation::kRelu:
      fn(std::integral_constant<Activation, Activation::kRelu>());
      return;
    case Activation::kGelu:
      fn(std::integral_constant<Activation, Activation::kGelu>());
      return;
    case Activation::kTanh:
      fn(std::integral_constant<Activation, Activation::kTanh>());
      return;
  }
  TANDEM_CHECK(false) << "unknown activation " << static_cast<int>(a);
}

// ---------------------------------------------------------------------------
// Elementwise functors.

struct FillOp {
  float value;
  __device__ void operator()(int64_t, float* v) const { v[0] = value; }
};

struct ScaleOp {
  float alpha;
  __device__ void operator()(int64_t, float* v) const { v[0] *= alpha; }
};

// v = {x, y}
struct AxpyOp {
  float alpha;
  __device__ void operator()(int64_t, float* v) const { v[1] += alpha * v[0]; }
};

// v = {a, b, out}
template <BinaryOp kOp>
struct BinaryFn {
  __device__ void operator()(int64_t, float* v) const {
    if (kOp == BinaryOp::kAdd) v[2] = v[0] + v[1];
    if (kOp == BinaryOp::kSub) v[2] = v[0] - v[1];
    if (kOp == BinaryOp::kMul) v[2] = v[0] * v[1];
  }
};

// v = {x, y}
template <Activation kAct>
struct ActivationForwardOp {
  __device__ void operator()(int64_t, float* v) const {
    v[1] = kernel_math::Activate(kAct, v[0]);
  }
};

// v = {x, dy, dx}
template <Activation kAct, bool kAccumulate>
struct ActivationBackwardOp {
  __device__ void operator()(int64_t, float* v) const {
    const float g = v[1] * kernel_math::ActivateGrad(kAct, v[0]);
    v[2] = kAccumulate ? v[2] + g : g;
  }
};

struct DropoutOp {
  float p;
  uint64_t seed;
  uint64_t offset;
  __device__ void operator()(int64_t i, float* v) const {
    v[0] =
        kernel_math::DropoutScale(p, seed, offset + static_cast<uint64_t>(i));
  }
};

// v = {param, grad, velocity} or {param, grad}
template <bool kVelocity>
struct SgdOp {
  SgdParams params;
  __device__ void operator()(int64_t, float* v) const {
    if constexpr (kVelocity) {
      kernel_math::SgdStep(params, v[0], v[1], &v[2]);
    } else {
      kernel_math::SgdStep(params, v[0], v[1], nullptr);
    }
  }
};

// v = {param, grad, m, v}
struct AdamWOp {
  AdamWParams params;
  float bias1;
  float bias2;
  __device__ void operator()(int64_t, float* v) const {
    kernel_math::AdamWStep(params, bias1, bias2, v[0], v[1], v[2], v[3]);
  }
};

// ---------------------------------------------------------------------------
// BiasActivation: a flat grid-stride loop that tracks its column instead of
// dividing per element (one 64-bit modulo per thread, not per element).
// kVec = 4 moves float4s when cols % 4 == 0 and the pointers are aligned.

template <Activation kAct, bool kPre, int kVec>
__global__ void BiasActivationKernel(const float* x, const float* bias,
                                     float* pre, float* out,
                                     int64_t units_per_row, int64_t units) {
  int64_t i = GlobalThread();
  if (i >= units) return;
  const int64_t stride = GridThreads();
  const int64_t column_step = stride % units_per_row;
  int64_t c = i % units_per_row;
  for (; i < units; i += stride) {
    if constexpr (kVec == 4) {
      const float4 xv = reinterpret_cast<const float4*>(x)[i];
      const float4 bv = reinterpret_cast<const float4*>(bias)[c];
      const float4 z =
          make_float4(xv.x + bv.x, xv.y + bv.y, xv.z + bv.z, xv.w + bv.w);
      if (kPre) reinterpret_cast<float4*>(pre)[i] = z;
      reinterpret_cast<float4*>(out)[i] = make_float4(
          kernel_math::Activate(kAct, z.x), kernel_math::Activate(kAct, z.y),
          kernel_math::Activate(kAct, z.z), kernel_math::Activate(kAct, z.w));
    } else {
      const float z = x[i] + bias[c];
      if (kPre) pre[i] = z;
      out[i] = kernel_math::Activate(kAct, z);
    }
    c += column_step;
    if (c >= units_per_row) c -= units_per_row;
  }
}

// ---------------------------------------------------------------------------
// Block reductions. Every thread gets the result. The order of operations is
// fixed by blockDim alone, so results are reproducible bit for bit.

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

__device__ int64_t BlockArgmax(const float* row, int64_t cols,
                               ArgmaxPair* shared) {
  ArgmaxPair best{-INFINITY, std::numeric_limits<int64_t>::max()};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    best = BetterOf(best, ArgmaxPair{row[c], c});
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    ArgmaxPair other;
    other.value = __shfl_xor_sync(0xffffffffu, best.value, offset);
    other.index = __shfl_xor_sync(0xffffffffu, best.index, offset);
    best = BetterOf(best, other);
  }
  const int warps = blockDim.x / 32;
  if (warps == 1) return best.index;
  const int lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = lane < warps
               ? shared[lane]
               : ArgmaxPair{-INFINITY, std::numeric_limits<int64_t>::max()};
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      ArgmaxPair other;
      other.value = __shfl_xor_sync(0xffffffffu, best.value, offset);
      other.index = __shfl_xor_sync(0xffffffffu, best.index, offset);
      best = BetterOf(best, other);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) shared[0] = best;
  __syncthreads();
  return shared[0].index;
}

// One block per row: enough threads to cover the row, 32 to 256.
int RowThreads(int64_t cols) {
  int threads = 32;
  while (threads < 256 && threads < cols) threads *= 2;
  return threads;
}

void CheckRows(const char* op, int64_t rows) {
  TANDEM_CHECK(rows <= std::numeric_limits<int>::max())
      << op << ": " << rows << " rows exceed the CUDA grid limit";
}

// A label is valid when it is a whole number in [0, classes). Checked as a
// float first: converting NaN or a huge float to an integer is undefined.
__device__ bool ValidLabel(float label, int64_t classes) {
  return label >= 0.f && label < static_cast<float>(classes) &&
         floorf(label) == label && static_cast<int64_t>(label) < classes;
}

// ---------------------------------------------------------------------------
// Row kernels.

__global__ void SoftmaxCrossEntropyKernel(const float* logits,
                                          const float* labels, int64_t classes,
                                          float normalizer, double* row_loss,
                                          float* dlogits) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * classes;

  float row_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    row_max = fmaxf(row_max, row[c]);
  }
  row_max = BlockAllReduce(row_max, MaxOp(), -INFINITY, shared_f);

  // Double precision, as the CPU backend: the loss is a difference of two
  // nearly equal numbers when the model is confident.
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    sum += exp(static_cast<double>(row[c] - row_max));
  }
  sum = BlockAllReduce(sum, SumOp(), 0.0, shared_d);
  const double log_sum = log(sum);

  const float label = labels[r];
  const bool valid = ValidLabel(label, classes);
  const int64_t target = valid ? static_cast<int64_t>(label) : -1;
  if (threadIdx.x == 0) {
    row_loss[r] = valid ? log_sum - static_cast<double>(row[target] - row_max)
                        : static_cast<double>(NAN);
  }
  if (dlogits != nullptr) {
    float* grad = dlogits + r * classes;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const double p = exp(static_cast<double>(row[c] - row_max) - log_sum);
      grad[c] =
          valid
              ? static_cast<float>((p - (c == target ? 1.0 : 0.0)) / normalizer)
              : NAN;
    }
  }
}

__global__ void ArgmaxKernel(const float* x, int64_t cols, float* out) {
  __shared__ ArgmaxPair shared[32];
  const int64_t r = blockIdx.x;
  const int64_t index = BlockArgmax(x + r * cols, cols, shared);
  if (threadIdx.x == 0) out[r] = static_cast<float>(index);
}

__global__ void CorrectKernel(const float* logits, const float* labels,
                              int64_t classes, double* correct) {
  __shared__ ArgmaxPair shared[32];
  const int64_t r = blockIdx.x;
  const int64_t index = BlockArgmax(logits + r * classes, classes, shared);
  if (threadIdx.x == 0) {
    const float label = labels[r];
    correct[r] = !ValidLabel(label, classes)
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

int MseBlocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>(
      std::max<int64_t>((n + kThreads - 1) / kThreads, 1), 1024));
}

__global__ void MseKernel(const float* pred, const float* target, int64_t n,
                          float normalizer, double* partials, float* dpred) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float d = pred[i] - target[i];
    acc += static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = 2.f * d / normalizer;
  }
  acc = BlockAllReduce(acc, SumOp(), 0.0, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// ---------------------------------------------------------------------------
// ColumnSums: a block owns 32 columns; its 16 rows of threads each sum every
// 16th row, then one thread per column adds the 16 partial sums in order.

constexpr int kColumnTile = 32;
constexpr int kRowPhases = 16;

__global__ void ColumnSumsKernel(const float* x, int64_t rows, int64_t cols,
                                 float alpha, float beta, float* out) {
  __shared__ float partial[kRowPhases][kColumnTile + 1];
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  float acc = 0.f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowPhases) {
      acc += x[r * cols + c];
    }
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kRowPhases; ++k) sum += partial[k][threadIdx.x];
    // beta == 0 must not read `out`: it may hold garbage (NaN * 0 is NaN).
    out[c] = beta == 0.f ? alpha * sum : beta * out[c] + alpha * sum;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

void BiasActivation(cudaStream_t stream, Activation activation, const float* x,
                    const float* bias, float* pre, float* out, int64_t rows,
                    int64_t cols) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  const bool vec = cols % 4 == 0 && Aligned16(x) && Aligned16(bias) &&
                   Aligned16(out) && (pre == nullptr || Aligned16(pre));
  const int64_t units_per_row = vec ? cols / 4 : cols;
  const int64_t units = vec ? n / 4 : n;
  DispatchActivation(activation, [&](auto act) {
    constexpr Activation kAct = decltype(act)::value;
    const int blocks = BlocksFor(units);
    if (vec && pre != nullptr) {
      BiasActivationKernel<kAct, true, 4><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else if (vec) {
      BiasActivationKernel<kAct, false, 4><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else if (pre != nullptr) {
      BiasActivationKernel<kAct, true, 1><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else {
      BiasActivationKernel<kAct, false, 1><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    }
  });
  TANDEM_CUDA_CHECK_LAUNCH()
      << "BiasActivation [" << rows << ", " << cols << "]";
}

void ColumnSums(cudaStream_t stream, const float* x, int64_t rows, int64_t cols,
                float alpha, float beta, float* out) {
  if (cols <= 0) return;
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  CheckRows("ColumnSums", tiles);
  ColumnSumsKernel<<<static_cast<int>(tiles), dim3(kColumnTile, kRowPhases), 0,
                     stream>>>(x, rows, cols, alpha, beta, out);
  TANDEM_CUDA_CHECK_LAUNCH() << "ColumnSums [" << rows << ", " << cols << "]";
}

void Binary(cudaStream_t stream, BinaryOp op, const float* a, const float* b,
            float* out, int64_t n) {
  const Slots<3> s{{In(a), In(b), out}};
  switch (op) {
    case BinaryOp::kAdd:
      LaunchMap<0b011, 0b100>(stream, "Add", s, n, BinaryFn<BinaryOp::kAdd>());
      return;
    case BinaryOp::kSub:
      LaunchMap<0b011, 0b100>(stream, "Sub", s, n, BinaryFn<BinaryOp::kSub>());
      return;
    case BinaryOp::kMul:
      LaunchMap<0b011, 0b100>(stream, "Mul", s, n, BinaryFn<BinaryOp::kMul>());
      return;
  }
  TANDEM_CHECK(false) << "unknown binary op " << static_cast<int>(op);
}

void Axpy(cudaStream_t stream, float alpha, const float* x, float* y,
          int64_t n) {
  LaunchMap<0b11, 0b10>(stream, "Axpy", Slots<2>{{In(x), y}}, n, AxpyOp{alpha});
}

void Scale(cudaStream_t stream, float alpha, float* x, int64_t n) {
  LaunchMap<0b1, 0b1>(stream, "Scale", Slots<1>{{x}}, n, ScaleOp{alpha});
}

void Fill(cudaStream_t stream, float value, float* x, int64_t n) {
  LaunchMap<0b0, 0b1>(stream, "Fill", Slots<1>{{x}}, n, FillOp{value});
}

__global__ void TrackNonFiniteKernel(const float* loss, float step,
                                     float* first_bad) {
  if (!isfinite(loss[0]) && first_bad[0] < 0.f) first_bad[0] = step;
}

void TrackNonFinite(cudaStream_t stream, const float* loss, int64_t step,
                    float* first_bad) {
  TrackNonFiniteKernel<<<1, 1, 0, stream>>>(loss, static_cast<float>(step),
                                            first_bad);
  TANDEM_CUDA_CHECK_LAUNCH() << "TrackNonFinite";
}

void ActivationForward(cudaStream_t stream, Activation activation,
                       const float* x, float* y, int64_t n) {
  DispatchActivation(activation, [&](auto act) {
    constexpr Activation kAct = decltype(act)::value;
    LaunchMap<0b01, 0b10>(stream, "ActivationForward", Slots<2>{{In(x), y}}, n,
                          ActivationForwardOp<kAct>());
  });
}

void ActivationBackward(cudaStream_t stream, Activation activation,
                        const float* x, const float* dy, float* dx, int64_t n,
                        bool accumulate) {
  const Slots<3> s{{In(x), In(dy), dx}};
  DispatchActivation(activation, [&](auto act) {
    constexpr Activation kAct = decltype(act)::value;
    if (accumulate) {
      LaunchMap<0b111, 0b100>(stream, "ActivationBackward", s, n,
                              ActivationBackwardOp<kAct, true>());
    } else {
      LaunchMap<0b011, 0b100>(stream, "ActivationBackward", s, n,
                              ActivationBackwardOp<kAct, false>());
    }
  });
}

size_t SoftmaxCrossEntropyScratchBytes(int64_t rows) {
  return static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(double);
}

void SoftmaxCrossEntropy(cudaStream_t stream, const float* logits,
                         const float* labels, int64_t rows, int64_t classes,
                         float normalizer, void* scratch, float* loss,
                         float* dlogits) {
  if (rows <= 0) return;
  CheckRows("SoftmaxCrossEntropy", rows);
  double* row_loss = static_cast<double*>(scratch);
  SoftmaxCrossEntropyKernel<<<static_cast<int>(rows), RowThreads(classes), 0,
                              stream>>>(logits, labels, classes, normalizer,
                                        row_loss, dlogits);
  TANDEM_CUDA_CHECK_LAUNCH()
      << "SoftmaxCrossEntropy [" << rows << ", " << classes << "]";
  LaunchSumToScalar(stream, row_loss, rows, normalizer, loss,
                    "SoftmaxCrossEntropy");
}

size_t MseScratchBytes(int64_t n) {
  return static_cast<size_t>(MseBlocks(n)) * sizeof(double);
}

void Mse(cudaStream_t stream, const float* pred, const float* target, int64_t n,
         float normalizer, void* scratch, float* loss, float* dpred) {
  if (n <= 0) return;
  const int blocks = MseBlocks(n);
  double* partials = static_cast<double*>(scratch);
  MseKernel<<<blocks, kThreads, 0, stream>>>(pred, target, n, normalizer,
                                             partials, dpred);
  TANDEM_CUDA_CHECK_LAUNCH() << "Mse (n = " << n << ")";
  LaunchSumToScalar(stream, partials, blocks, normalizer, loss, "Mse");
}

void Argmax(cudaStream_t stream, const float* x, int64_t rows, int64_t cols,
            float* out) {
  if (rows <= 0) return;
  CheckRows("Argmax", rows);
  ArgmaxKernel<<<static_cast<int>(rows), RowThreads(cols), 0, stream>>>(x, cols,
                                                                        out);
  TANDEM_CUDA_CHECK_LAUNCH() << "Argmax [" << rows << ", " << cols << "]";
}

size_t CountCorrectScratchBytes(int64_t rows) {
  return static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(double);
}

void CountCorrect(cudaStream_t stream, const float* logits, const float* labels,
                  int64_t rows, int64_t classes, void* scratch, float* out) {
  if (rows <= 0) return;
  CheckRows("CountCorrect", rows);
  double* correct = static_cast<double*>(scratch);
  CorrectKernel<<<static_cast<int>(rows), RowThreads(classes), 0, stream>>>(
      logits, labels, classes, correct);
  TANDEM_CUDA_CHECK_LAUNCH()
      << "CountCorrect [" << rows << ", " << classes << "]";
  LaunchSumToScalar(stream, correct, rows, 1.0, out, "CountCorrect");
}

void DropoutMask(cudaStream_t stream, float p, uint64_t seed, uint64_t offset,
                 float* mask, int64_t n) {
  LaunchMap<0b0, 0b1>(stream, "DropoutMask", Slots<1>{{mask}}, n,
                      DropoutOp{p, seed, offset});
}

void SgdUpdate(cudaStream_t stream, const SgdParams& params, float* param,
               const float* grad, float* velocity, int64_t n) {
  if (velocity != nullptr) {
    LaunchMap<0b111, 0b101>(stream, "SgdUpdate",
                            Slots<3>{{param, In(grad), velocity}}, n,
                            SgdOp<true>{params});
  } else {
    LaunchMap<0b11, 0b01>(stream, "SgdUpdate", Slots<2>{{param, In(grad)}}, n,
                          SgdOp<false>{params});
  }
}

void AdamWUpdate(cudaStream_t stream, const AdamWParams& params, int64_t step,
                 float* param, const float* grad, float* m, float* v,
                 int64_t n) {
  // As the CPU backend computes them (std::pow in float), so both backends
  // divide by the same bias corrections.
  const float bias1 = 1.f - std::pow(params.beta1, static_cast<float>(step));
  const float bias2 = 1.f - std::pow(params.beta2, static_cast<float>(step));
  LaunchMap<0b1111, 0b1101>(stream, "AdamWUpdate",
                            Slots<4>{{param, In(grad), m, v}}, n,
                            AdamWOp{params, bias1, bias2});
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
