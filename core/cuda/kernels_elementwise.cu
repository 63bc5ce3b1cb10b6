// The CUDA backend's element-wise kernels over float32 and bfloat16: the
// per-element functors of the map (core/cuda/kernel_map.cuh) for fill,
// scale, cast, axpy, the binary ops (core/elementwise_math.h) and the
// activations, and the fused bias + activation. The optimizer updates and
// dropout are in kernels_update.cu, the reductions in kernels_reduce.cu,
// the math ops of core/ops_math.h in kernels_math*.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernel_map.cuh"
#include "core/cuda/kernels.h"
#include "core/elementwise_math.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// Calls fn(std::integral_constant<Activation, a>()), so kernels are compiled
// once per activation and kernel_math's switch folds away.
template <typename Fn>
void DispatchActivation(Activation a, Fn&& fn) {
  const bool known = kernel_math::VisitActivation(a, fn);
  TANDEM_CHECK(known) << "unknown activation " << static_cast<int>(a);
}

// ---------------------------------------------------------------------------
// Elementwise functors (slot values as floats; see kernel_map.cuh).

struct FillOp {
  float value;
  __device__ void operator()(int64_t, float* v) const { v[0] = value; }
};

struct ScaleOp {
  float alpha;
  __device__ void operator()(int64_t, float* v) const { v[0] *= alpha; }
};

// v = {src, dst}: the conversion is the map's load and rounded store.
struct CopyOp {
  __device__ void operator()(int64_t, float* v) const { v[1] = v[0]; }
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
    v[2] = kernel_math::ApplyBinary(kOp, v[0], v[1]);
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

// ---------------------------------------------------------------------------
// BiasActivation: a flat grid-stride loop that tracks its column instead of
// dividing per element (one 64-bit modulo per thread, not per element). Each
// unit is kVec elements: 16-byte vectors (4 float32 or 8 bfloat16) when
// cols is a multiple and the pointers are aligned, else 1.

template <typename T, Activation kAct, bool kPre, int kVec>
__global__ void BiasActivationKernel(const T* x, const T* bias, T* pre, T* out,
                                     int64_t units_per_row, int64_t units) {
  int64_t i = GlobalThread();
  if (i >= units) return;
  const int64_t stride = GridThreads();
  const int64_t column_step = stride % units_per_row;
  int64_t c = i % units_per_row;
  for (; i < units; i += stride) {
    float z[kVec], b[kVec], y[kVec];
    LoadVec<kVec>(x, i, z);
    LoadVec<kVec>(bias, c, b);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      z[e] += b[e];
      y[e] = kernel_math::Activate(kAct, z[e]);
    }
    if (kPre) StoreVec<kVec>(pre, i, z);
    StoreVec<kVec>(out, i, y);
    c += column_step;
    if (c >= units_per_row) c -= units_per_row;
  }
}

template <typename T>
void LaunchBiasActivation(cudaStream_t stream, Activation activation, const T* x,
                          const T* bias, T* pre, T* out, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n = rows * cols;
  const bool vec = cols % kVec == 0 && Aligned16(x) && Aligned16(bias) &&
                   Aligned16(out) && (pre == nullptr || Aligned16(pre));
  const int64_t units_per_row = vec ? cols / kVec : cols;
  const int64_t units = vec ? n / kVec : n;
  const int blocks = BlocksFor(units);
  DispatchActivation(activation, [&](auto act) {
    constexpr Activation kAct = decltype(act)::value;
    if (vec && pre != nullptr) {
      BiasActivationKernel<T, kAct, true, kVec><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else if (vec) {
      BiasActivationKernel<T, kAct, false, kVec><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else if (pre != nullptr) {
      BiasActivationKernel<T, kAct, true, 1><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    } else {
      BiasActivationKernel<T, kAct, false, 1><<<blocks, kThreads, 0, stream>>>(
          x, bias, pre, out, units_per_row, units);
    }
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "BiasActivation [" << rows << ", " << cols << "] "
                             << (kIsBf16<T> ? "bfloat16" : "float32");
}

template <typename T>
void LaunchBinary(cudaStream_t stream, BinaryOp op, const Slots<3>& s, int64_t n) {
  constexpr unsigned kBf16 = Bf16Mask<T, T, T>();
  switch (op) {
    case BinaryOp::kAdd:
      LaunchMap<0b011, 0b100, kBf16>(stream, "Add", s, n, BinaryFn<BinaryOp::kAdd>());
      return;
    case BinaryOp::kSub:
      LaunchMap<0b011, 0b100, kBf16>(stream, "Sub", s, n, BinaryFn<BinaryOp::kSub>());
      return;
    case BinaryOp::kMul:
      LaunchMap<0b011, 0b100, kBf16>(stream, "Mul", s, n, BinaryFn<BinaryOp::kMul>());
      return;
    case BinaryOp::kDiv:
      LaunchMap<0b011, 0b100, kBf16>(stream, "Div", s, n, BinaryFn<BinaryOp::kDiv>());
      return;
  }
  TANDEM_CHECK(false) << "unknown binary op " << static_cast<int>(op);
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers.

void BiasActivation(cudaStream_t stream, Activation activation, CPtr x, CPtr bias,
                    Ptr pre, Ptr out, int64_t rows, int64_t cols) {
  if (rows * cols <= 0) return;
  CheckOneDType("BiasActivation", {{"x", x}, {"bias", bias}, {"pre", pre}, {"out", out}});
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LaunchBiasActivation<T>(stream, activation, static_cast<const T*>(x.data),
                            static_cast<const T*>(bias.data), static_cast<T*>(pre.data),
                            static_cast<T*>(out.data), rows, cols);
  });
}

void Binary(cudaStream_t stream, BinaryOp op, CPtr a, CPtr b, Ptr out, int64_t n) {
  CheckOneDType("Binary", {{"a", a}, {"b", b}, {"out", out}});
  const Slots<3> s{{In(a.data), In(b.data), out.data}};
  DispatchDType(a.dtype, [&](auto tag) {
    LaunchBinary<typename decltype(tag)::type>(stream, op, s, n);
  });
}

void Axpy(cudaStream_t stream, float alpha, CPtr x, Ptr y, int64_t n) {
  const Slots<2> s{{In(x.data), y.data}};
  DispatchDType(x.dtype, [&](auto tx) {
    DispatchDType(y.dtype, [&](auto ty) {
      constexpr unsigned kBf16 =
          Bf16Mask<typename decltype(tx)::type, typename decltype(ty)::type>();
      LaunchMap<0b11, 0b10, kBf16>(stream, "Axpy", s, n, AxpyOp{alpha});
    });
  });
}

void Scale(cudaStream_t stream, float alpha, Ptr x, int64_t n) {
  DispatchDType(x.dtype, [&](auto tag) {
    constexpr unsigned kBf16 = Bf16Mask<typename decltype(tag)::type>();
    LaunchMap<0b1, 0b1, kBf16>(stream, "Scale", Slots<1>{{x.data}}, n, ScaleOp{alpha});
  });
}

void Fill(cudaStream_t stream, float value, Ptr x, int64_t n) {
  DispatchDType(x.dtype, [&](auto tag) {
    constexpr unsigned kBf16 = Bf16Mask<typename decltype(tag)::type>();
    LaunchMap<0b0, 0b1, kBf16>(stream, "Fill", Slots<1>{{x.data}}, n, FillOp{value});
  });
}

void Cast(cudaStream_t stream, CPtr src, Ptr dst, int64_t n) {
  if (n <= 0) return;
  if (src.dtype == dst.dtype) {
    if (src.data == dst.data) return;
    CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(n) * SizeOf(src.dtype),
                               cudaMemcpyDeviceToDevice, stream))
        << "Cast: copying " << n << " " << DTypeName(src.dtype) << " elements";
    return;
  }
  const Slots<2> s{{In(src.data), dst.data}};
  DispatchDType(src.dtype, [&](auto ts) {
    DispatchDType(dst.dtype, [&](auto td) {
      using TS = typename decltype(ts)::type;
      using TD = typename decltype(td)::type;
      if constexpr (!std::is_same_v<TS, TD>) {
        LaunchMap<0b01, 0b10, Bf16Mask<TS, TD>()>(stream, "Cast", s, n, CopyOp());
      }
    });
  });
}

void ActivationForward(cudaStream_t stream, Activation activation, CPtr x, Ptr y,
                       int64_t n) {
  CheckOneDType("ActivationForward", {{"x", x}, {"y", y}});
  const Slots<2> s{{In(x.data), y.data}};
  DispatchDType(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DispatchActivation(activation, [&](auto act) {
      constexpr Activation kAct = decltype(act)::value;
      LaunchMap<0b01, 0b10, Bf16Mask<T, T>()>(stream, "ActivationForward", s, n,
                                              ActivationForwardOp<kAct>());
    });
  });
}

void ActivationBackward(cudaStream_t stream, Activation activation, CPtr x, CPtr dy,
                        Ptr dx, int64_t n, bool accumulate) {
  CheckOneDType("ActivationBackward", {{"dy", dy}, {"dx", dx}});
  const Slots<3> s{{In(x.data), In(dy.data), dx.data}};
  DispatchDType(x.dtype, [&](auto tx) {
    DispatchDType(dy.dtype, [&](auto tg) {
      using TX = typename decltype(tx)::type;
      using TG = typename decltype(tg)::type;
      constexpr unsigned kBf16 = Bf16Mask<TX, TG, TG>();
      DispatchActivation(activation, [&](auto act) {
        constexpr Activation kAct = decltype(act)::value;
        if (accumulate) {
          LaunchMap<0b111, 0b100, kBf16>(stream, "ActivationBackward", s, n,
                                         ActivationBackwardOp<kAct, true>());
        } else {
          LaunchMap<0b011, 0b100, kBf16>(stream, "ActivationBackward", s, n,
                                         ActivationBackwardOp<kAct, false>());
        }
      });
    });
  });
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
