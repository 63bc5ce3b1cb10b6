// The element-wise "map" of the CUDA backend: one grid-stride kernel that
// each element-wise op (kernels_elementwise.cu, kernels_update.cu)
// instantiates with its per-element functor, over operands of float32 or
// bfloat16. Device code for nvcc only.
//
//   // y = y + alpha * x, x and y of element types TX and TY
//   LaunchMap<0b11, 0b10, Bf16Mask<TX, TY>()>(stream, "Axpy",
//       Slots<2>{{In(x), y}}, n, AxpyOp{alpha});
//
// A map has kN slots per element, each an operand's pointer; bit j of kRead
// says slot j is loaded before the functor runs, bit j of kWrite that it is
// stored after, bit j of kBf16 that it holds bfloat16 (else float32). The
// functor gets the element index and the slot values as floats: f(i, v).
// Stores round once (Note [bfloat16 rounding on the GPU]). Slots that alias
// (x == out) are fine: each element is loaded before it is stored.
#ifndef TANDEM_CORE_CUDA_KERNEL_MAP_CUH_
#define TANDEM_CORE_CUDA_KERNEL_MAP_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"

namespace tandem {
namespace cuda {
namespace kernels {

template <int kN>
struct Slots {
  void* p[kN];
};

// Slots hold void*; inputs are only read (kRead without kWrite).
inline void* In(const void* p) { return const_cast<void*>(p); }

// The kBf16 mask of slots of element types Ts, in order (a void slot, one
// the op leaves out, counts as float32).
template <typename... Ts>
constexpr unsigned Bf16Mask() {
  unsigned mask = 0, bit = 1;
  ((mask |= kIsBf16<Ts> ? bit : 0u, bit <<= 1), ...);
  return mask;
}

static_assert(Bf16Mask<float, __nv_bfloat16, float, void, __nv_bfloat16>() == 0b10010u,
              "slot j of the mask is bit j");

// Elements per step of the vector kernel: a float4 per float32 slot when
// every slot is float32; otherwise 8, one 16-byte vector per bfloat16 slot
// and two float4s per float32 slot.
constexpr int MapVecWidth(unsigned bf16_mask) { return bf16_mask != 0 ? 8 : 4; }

// Calls fn(std::integral_constant<int, j>()) for j = 0 .. kN - 1, so each
// slot's dtype and bits are compile-time constants in fn.
template <typename Fn, int... kJ>
__device__ __forceinline__ void ForEachSlotOf(Fn& fn, std::integer_sequence<int, kJ...>) {
  (fn(std::integral_constant<int, kJ>()), ...);
}
template <int kN, typename Fn>
__device__ __forceinline__ void ForEachSlot(Fn&& fn) {
  ForEachSlotOf(fn, std::make_integer_sequence<int, kN>());
}

// Slot j's elements [kV q, kV q + kV) to and from floats, when kRead (for
// loads) or kWrite (for stores) has bit j.
template <unsigned kRead, unsigned kBf16, int kV, int kN>
__device__ __forceinline__ void LoadSlots(const Slots<kN>& s, int64_t q, float (*v)[kV]) {
  ForEachSlot<kN>([&](auto slot) {
    constexpr int j = decltype(slot)::value;
    if constexpr (((kRead >> j) & 1u) != 0) {
      if constexpr (((kBf16 >> j) & 1u) != 0) {
        LoadVec<kV>(static_cast<const __nv_bfloat16*>(s.p[j]), q, v[j]);
      } else {
        LoadVec<kV>(static_cast<const float*>(s.p[j]), q, v[j]);
      }
    }
  });
}

template <unsigned kWrite, unsigned kBf16, int kV, int kN>
__device__ __forceinline__ void StoreSlots(const Slots<kN>& s, int64_t q,
                                           const float (*v)[kV]) {
  ForEachSlot<kN>([&](auto slot) {
    constexpr int j = decltype(slot)::value;
    if constexpr (((kWrite >> j) & 1u) != 0) {
      if constexpr (((kBf16 >> j) & 1u) != 0) {
        StoreVec<kV>(static_cast<__nv_bfloat16*>(s.p[j]), q, v[j]);
      } else {
        StoreVec<kV>(static_cast<float*>(s.p[j]), q, v[j]);
      }
    }
  });
}

// Maps the elements [begin, n) one at a time, grid-stride from `begin`: the
// whole of MapKernel, and the elements MapVecKernel leaves over.
template <int kN, unsigned kRead, unsigned kWrite, unsigned kBf16, typename F>
__device__ __forceinline__ void MapScalar(Slots<kN> s, int64_t begin,
                                          int64_t n, F f) {
  for (int64_t i = begin + GlobalThread(); i < n; i += GridThreads()) {
    float v[kN][1] = {};
    LoadSlots<kRead, kBf16, 1>(s, i, v);
    float w[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) w[j] = v[j][0];
    f(i, w);
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j][0] = w[j];
    StoreSlots<kWrite, kBf16, 1>(s, i, v);
  }
}

template <int kN, unsigned kRead, unsigned kWrite, unsigned kBf16, typename F>
__global__ void MapKernel(Slots<kN> s, int64_t n, F f) {
  MapScalar<kN, kRead, kWrite, kBf16>(s, 0, n, f);
}

// The same map, kV = MapVecWidth(kBf16) elements per step with 16-byte
// memory operations; the last n % kV elements go through the scalar path.
template <int kN, unsigned kRead, unsigned kWrite, unsigned kBf16, typename F>
__global__ void MapVecKernel(Slots<kN> s, int64_t n, F f) {
  constexpr int kV = MapVecWidth(kBf16);
  const int64_t groups = n / kV;
  for (int64_t q = GlobalThread(); q < groups; q += GridThreads()) {
    float a[kN][kV] = {};
    LoadSlots<kRead, kBf16, kV>(s, q, a);
#pragma unroll
    for (int e = 0; e < kV; ++e) {
      float v[kN];
#pragma unroll
      for (int j = 0; j < kN; ++j) v[j] = a[j][e];
      f(kV * q + e, v);
#pragma unroll
      for (int j = 0; j < kN; ++j) a[j][e] = v[j];
    }
    StoreSlots<kWrite, kBf16, kV>(s, q, a);
  }
  MapScalar<kN, kRead, kWrite, kBf16>(s, kV * groups, n, f);
}

// The vector kernel when every slot is 16-byte aligned (null slots, which
// the map leaves alone, count as aligned), the scalar one otherwise.
template <unsigned kRead, unsigned kWrite, unsigned kBf16, int kN, typename F>
void LaunchMap(cudaStream_t stream, const char* name, Slots<kN> s, int64_t n,
               F f) {
  if (n <= 0) return;
  constexpr int kV = MapVecWidth(kBf16);
  bool aligned = true;
  for (int j = 0; j < kN; ++j) aligned = aligned && Aligned16(s.p[j]);
  if (aligned && n >= kV) {
    MapVecKernel<kN, kRead, kWrite, kBf16, F>
        <<<BlocksFor(n / kV), kThreads, 0, stream>>>(s, n, f);
  } else {
    MapKernel<kN, kRead, kWrite, kBf16, F>
        <<<BlocksFor(n), kThreads, 0, stream>>>(s, n, f);
  }
  TANDEM_CUDA_CHECK_LAUNCH() << name << " (n = " << n << ")";
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNEL_MAP_CUH_
