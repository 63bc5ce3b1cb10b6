// The element-wise math of core/ops_math.h on the GPU: unary functions and
// scalar ops as functors of the map (core/cuda/kernel_map.cuh), and the
// broadcasts of a vector over the rows or columns of a matrix. The scalar
// functions are core/elementwise_math.h's, shared with the CPU backend.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernel_map.cuh"
#include "core/cuda/kernels_math.h"
#include "core/elementwise_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// Calls fn(std::integral_constant<UnaryOp, op>()), so each function is
// compiled into its own kernel and ApplyUnary's switch folds away.
template <typename Fn>
void DispatchUnary(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::kExp: fn(std::integral_constant<UnaryOp, UnaryOp::kExp>()); return;
    case UnaryOp::kLog: fn(std::integral_constant<UnaryOp, UnaryOp::kLog>()); return;
    case UnaryOp::kSqrt: fn(std::integral_constant<UnaryOp, UnaryOp::kSqrt>()); return;
    case UnaryOp::kRsqrt: fn(std::integral_constant<UnaryOp, UnaryOp::kRsqrt>()); return;
    case UnaryOp::kReciprocal:
      fn(std::integral_constant<UnaryOp, UnaryOp::kReciprocal>());
      return;
  }
  TANDEM_CHECK(false) << "unknown unary op " << static_cast<int>(op);
}

// The same for BinaryOp.
template <typename Fn>
void DispatchBinary(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::kAdd: fn(std::integral_constant<BinaryOp, BinaryOp::kAdd>()); return;
    case BinaryOp::kSub: fn(std::integral_constant<BinaryOp, BinaryOp::kSub>()); return;
    case BinaryOp::kMul: fn(std::integral_constant<BinaryOp, BinaryOp::kMul>()); return;
    case BinaryOp::kDiv: fn(std::integral_constant<BinaryOp, BinaryOp::kDiv>()); return;
  }
  TANDEM_CHECK(false) << "unknown binary op " << static_cast<int>(op);
}

// v = {x, out}
template <UnaryOp kOp>
struct UnaryFn {
  __device__ void operator()(int64_t, float* v) const {
    v[1] = kernel_math::ApplyUnary(kOp, v[0]);
  }
};

// v = {x, out}
template <BinaryOp kOp>
struct ScalarFn {
  float s;
  __device__ void operator()(int64_t, float* v) const {
    v[1] = kernel_math::ApplyBinary(kOp, v[0], s);
  }
};

// A flat grid-stride loop over x [rows, cols] that tracks its row and
// column instead of dividing per element (two 64-bit divisions per thread,
// not per element). Each thread reads and writes only its own elements, so
// out may be x.
template <typename T, BinaryOp kOp, Broadcast kHow>
__global__ void BroadcastKernel(const T* x, const T* v, T* out, int64_t cols, int64_t n) {
  int64_t i = GlobalThread();
  if (i >= n) return;
  const int64_t stride = GridThreads();
  const int64_t row_step = stride / cols, column_step = stride % cols;
  int64_t r = i / cols, c = i % cols;
  for (; i < n; i += stride) {
    const float b = ToFloat(v[kHow == Broadcast::kRow ? c : r]);
    out[i] = FromFloat<T>(kernel_math::ApplyBinary(kOp, ToFloat(x[i]), b));
    r += row_step;
    c += column_step;
    if (c >= cols) {
      c -= cols;
      ++r;
    }
  }
}

}  // namespace

void Unary(cudaStream_t stream, UnaryOp op, CPtr x, Ptr out, int64_t n) {
  CheckOneDType("Unary", {{"x", x}, {"out", out}});
  const Slots<2> s{{In(x.data), out.data}};
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchUnary(op, [&](auto unary) {
      constexpr UnaryOp kOp = decltype(unary)::value;
      LaunchMap<0b01, 0b10, Bf16Mask<T, T>()>(stream, "Unary", s, n, UnaryFn<kOp>());
    });
  });
}

void BinaryScalar(cudaStream_t stream, BinaryOp op, CPtr x, float s, Ptr out, int64_t n) {
  CheckOneDType("BinaryScalar", {{"x", x}, {"out", out}});
  const Slots<2> slots{{In(x.data), out.data}};
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchBinary(op, [&](auto binary) {
      constexpr BinaryOp kOp = decltype(binary)::value;
      LaunchMap<0b01, 0b10, Bf16Mask<T, T>()>(stream, "BinaryScalar", slots, n,
                                              ScalarFn<kOp>{s});
    });
  });
}

void BroadcastBinary(cudaStream_t stream, BinaryOp op, Broadcast how, CPtr x, CPtr v,
                     Ptr out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  CheckOneDType("BroadcastBinary", {{"x", x}, {"v", v}, {"out", out}});
  const int blocks = BlocksFor(n);
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x.data);
    const T* vs = static_cast<const T*>(v.data);
    T* outs = static_cast<T*>(out.data);
    DispatchBinary(op, [&](auto binary) {
      constexpr BinaryOp kOp = decltype(binary)::value;
      if (how == Broadcast::kRow) {
        BroadcastKernel<T, kOp, Broadcast::kRow>
            <<<blocks, kThreads, 0, stream>>>(xs, vs, outs, cols, n);
      } else {
        BroadcastKernel<T, kOp, Broadcast::kColumn>
            <<<blocks, kThreads, 0, stream>>>(xs, vs, outs, cols, n);
      }
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "BroadcastBinary [" << rows << ", " << cols << "] "
                             << DTypeName(x.dtype);
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
