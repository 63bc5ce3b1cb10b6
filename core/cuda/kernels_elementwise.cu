// The CUDA backend's element-wise kernels: one grid-stride "map" kernel
// (float4 loads and stores when every pointer is 16-byte aligned) that each
// op instantiates with its per-element functor, and the fused bias +
// activation. The reductions are in kernels_reduce.cu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

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

// Maps the elements [begin, n) one at a time, grid-stride from `begin`: the
// whole of MapKernel, and the n % 4 elements MapVec4Kernel leaves over.
template <int kN, unsigned kRead, unsigned kWrite, typename F>
__device__ __forceinline__ void MapScalar(Slots<kN> s, int64_t begin,
                                          int64_t n, F f) {
  for (int64_t i = begin + GlobalThread(); i < n; i += GridThreads()) {
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

template <int kN, unsigned kRead, unsigned kWrite, typename F>
__global__ void MapKernel(Slots<kN> s, int64_t n, F f) {
  MapScalar<kN, kRead, kWrite>(s, 0, n, f);
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
  MapScalar<kN, kRead, kWrite>(s, 4 * n4, n, f);
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
