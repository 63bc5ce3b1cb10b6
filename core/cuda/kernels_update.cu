// The CUDA backend's optimizer updates and dropout masks: maps (see
// core/cuda/kernel_map.cuh) over a float32 parameter and its float32 state,
// a float32 or bfloat16 gradient and, optionally, a working copy that
// receives the updated parameter in its own dtype in the same pass (the
// bfloat16 weights a mixed-precision layer computes with). One pass reads
// and writes each element once, which is what bounds an update's time.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernel_map.cuh"
#include "core/cuda/kernels.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

struct DropoutOp {
  float p;
  uint64_t seed;
  uint64_t offset;
  __device__ void operator()(int64_t i, float* v) const {
    v[0] =
        kernel_math::DropoutScale(p, seed, offset + static_cast<uint64_t>(i));
  }
};

// Slots of SgdUpdate: {param, grad, velocity, working}; velocity and working
// take part only when the op has them (their kRead/kWrite bits).
template <bool kVelocity>
struct SgdOp {
  SgdParams params;
  __device__ void operator()(int64_t, float* v) const {
    if constexpr (kVelocity) {
      kernel_math::SgdStep(params, v[0], v[1], &v[2]);
    } else {
      kernel_math::SgdStep(params, v[0], v[1], nullptr);
    }
    v[3] = v[0];
  }
};

// Slots of AdamWUpdate: {param, grad, m, v, working}.
struct AdamWOp {
  AdamWParams params;
  float bias1;
  float bias2;
  __device__ void operator()(int64_t, float* v) const {
    kernel_math::AdamWStep(params, bias1, bias2, v[0], v[1], v[2], v[3]);
    v[4] = v[0];
  }
};

// Calls fn(TypeTag<TW>()) with TW the working copy's element type, or void
// when there is none (working.data null).
template <typename Fn>
void DispatchWorking(Ptr working, Fn&& fn) {
  if (working.data == nullptr) {
    fn(TypeTag<void>());
  } else {
    DispatchDType(working.dtype, fn);
  }
}

template <typename TG, typename TW>
void LaunchSgd(cudaStream_t stream, const SgdParams& params, float* param,
               const void* grad, float* velocity, void* working, int64_t n) {
  constexpr unsigned kWorking = std::is_void_v<TW> ? 0u : 0b1000u;
  constexpr unsigned kBf16 = Bf16Mask<float, TG, float, TW>();
  const Slots<4> s{{param, In(grad), velocity, working}};
  if (velocity != nullptr) {
    LaunchMap<0b0111, 0b0101 | kWorking, kBf16>(stream, "SgdUpdate", s, n,
                                                SgdOp<true>{params});
  } else {
    LaunchMap<0b0011, 0b0001 | kWorking, kBf16>(stream, "SgdUpdate", s, n,
                                                SgdOp<false>{params});
  }
}

}  // namespace

void DropoutMask(cudaStream_t stream, float p, uint64_t seed, uint64_t offset, Ptr mask,
                 int64_t n) {
  DispatchDType(mask.dtype, [&](auto tag) {
    constexpr unsigned kBf16 = Bf16Mask<typename decltype(tag)::type>();
    LaunchMap<0b0, 0b1, kBf16>(stream, "DropoutMask", Slots<1>{{mask.data}}, n,
                               DropoutOp{p, seed, offset});
  });
}

void SgdUpdate(cudaStream_t stream, const SgdParams& params, float* param, CPtr grad,
               float* velocity, Ptr working, int64_t n) {
  DispatchDType(grad.dtype, [&](auto tg) {
    DispatchWorking(working, [&](auto tw) {
      LaunchSgd<typename decltype(tg)::type, typename decltype(tw)::type>(
          stream, params, param, grad.data, velocity, working.data, n);
    });
  });
}

void AdamWUpdate(cudaStream_t stream, const AdamWParams& params, int64_t step, float* param,
                 CPtr grad, float* m, float* v, Ptr working, int64_t n) {
  // As the CPU backend computes them (std::pow in float), so both backends
  // divide by the same bias corrections.
  const float bias1 = 1.f - std::pow(params.beta1, static_cast<float>(step));
  const float bias2 = 1.f - std::pow(params.beta2, static_cast<float>(step));
  const Slots<5> s{{param, In(grad.data), m, v, working.data}};
  const AdamWOp op{params, bias1, bias2};
  DispatchDType(grad.dtype, [&](auto tg) {
    DispatchWorking(working, [&](auto tw) {
      using TW = typename decltype(tw)::type;
      constexpr unsigned kWorking = std::is_void_v<TW> ? 0u : 0b10000u;
      constexpr unsigned kBf16 = Bf16Mask<float, typename decltype(tg)::type, float, float, TW>();
      LaunchMap<0b01111, 0b01101 | kWorking, kBf16>(stream, "AdamWUpdate", s, n, op);
    });
  });
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
