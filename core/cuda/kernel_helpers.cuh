// Launch geometry, grid-stride indexing and element types shared by the CUDA
// backend's kernel files (kernels_elementwise.cu, kernels_update.cu,
// kernels_reduce.cu, kernels_math*.cu). Device code only for nvcc; the host
// launchers' API is core/cuda/kernels.h and core/cuda/kernels_math.h.
//
//   for (int64_t i = GlobalThread(); i < n; i += GridThreads()) ...
//   MyKernel<<<BlocksFor(n), kThreads, 0, stream>>>(...);
//   TANDEM_CUDA_CHECK_LAUNCH() << "MyKernel (n = " << n << ")";
//
// Element types: a float32 operand is `float`, a bfloat16 one
// `__nv_bfloat16`. Kernels load either into float (ToFloat, LoadVec),
// compute in float and round each result once when they store it
// (FromFloat, StoreVec). See Note [bfloat16 rounding on the GPU].
//
//   DispatchDType(x.dtype, [&](auto tag) {
//     using T = typename decltype(tag)::type;   // float or __nv_bfloat16
//     MyKernel<T><<<...>>>(static_cast<const T*>(x.data), ...);
//   });
#ifndef TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_
#define TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/dtype.h"

namespace tandem {
namespace cuda {
namespace kernels {

inline constexpr int kThreads = 256;
// Grid-stride loops cover the rest; 4096 blocks of 256 threads is several
// waves on any current GPU.
inline constexpr int64_t kMaxBlocks = 4096;

// Blocks of kThreads for `work` grid-stride items: at least 1, at most
// max_blocks.
inline int BlocksFor(int64_t work, int64_t max_blocks = kMaxBlocks) {
  return static_cast<int>(std::min<int64_t>(
      std::max<int64_t>((work + kThreads - 1) / kThreads, 1), max_blocks));
}

// 16-byte vector loads and stores (float4, 8 bfloat16) need 16-byte aligned
// addresses.
inline bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Whether a float32 index (a label, a row of a table) is a whole number in
// [0, count). Checked as a float first: converting NaN or a huge float to an
// integer is undefined.
__device__ __forceinline__ bool IsIndexBelow(float index, int64_t count) {
  return index >= 0.f && index < static_cast<float>(count) && floorf(index) == index &&
         static_cast<int64_t>(index) < count;
}

// ---------------------------------------------------------------------------
// Element types.
//
// Note [bfloat16 rounding on the GPU]
// A bfloat16 result is computed in float and rounded once, to nearest even,
// by __float2bfloat16_rn (cvt.rn.bf16.f32): for every value but NaN the same
// bits as FloatToBFloat16Bits (core/dtype.h), subnormals included, so a
// kernel whose float math equals the CPU backend's stores the same bfloat16
// bits. NaN becomes a NaN either way (the payloads differ). Widening
// bfloat16 to float is exact (the bits shifted up by 16).

template <typename T>
inline constexpr bool kIsBf16 = std::is_same_v<T, __nv_bfloat16>;

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v) {
  if constexpr (kIsBf16<T>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

// Two floats rounded to bfloat16, packed as they lie in memory (lo first).
__device__ __forceinline__ unsigned PackBf16(float lo, float hi) {
  const unsigned l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const unsigned h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return l | (h << 16);
}

// Elements [kV q, kV q + kV) of p as floats. kV == 1 is a plain load; a
// larger kV moves 16-byte vectors (float4, or 8 bfloat16 in a uint4) and
// needs p 16-byte aligned and kV a multiple of the vector's elements.
template <int kV>
__device__ __forceinline__ void LoadVec(const float* p, int64_t q, float* out) {
  if constexpr (kV == 1) {
    out[0] = p[q];
  } else {
    static_assert(kV % 4 == 0, "float vectors are float4s");
    const float4* src = reinterpret_cast<const float4*>(p) + q * (kV / 4);
#pragma unroll
    for (int h = 0; h < kV / 4; ++h) {
      const float4 t = src[h];
      out[4 * h] = t.x;
      out[4 * h + 1] = t.y;
      out[4 * h + 2] = t.z;
      out[4 * h + 3] = t.w;
    }
  }
}

template <int kV>
__device__ __forceinline__ void LoadVec(const __nv_bfloat16* p, int64_t q,
                                        float* out) {
  if constexpr (kV == 1) {
    out[0] = __bfloat162float(p[q]);
  } else {
    static_assert(kV % 8 == 0, "bfloat16 vectors are 8 elements");
    const uint4* src = reinterpret_cast<const uint4*>(p) + q * (kV / 8);
#pragma unroll
    for (int h = 0; h < kV / 8; ++h) {
      const uint4 t = src[h];
      const unsigned words[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        out[8 * h + 2 * w] = __uint_as_float(words[w] << 16);
        out[8 * h + 2 * w + 1] = __uint_as_float(words[w] & 0xffff0000u);
      }
    }
  }
}

// Stores in[0, kV) as elements [kV q, kV q + kV) of p, rounded to p's type;
// the same vector rules as LoadVec.
template <int kV>
__device__ __forceinline__ void StoreVec(float* p, int64_t q, const float* in) {
  if constexpr (kV == 1) {
    p[q] = in[0];
  } else {
    static_assert(kV % 4 == 0, "float vectors are float4s");
    float4* dst = reinterpret_cast<float4*>(p) + q * (kV / 4);
#pragma unroll
    for (int h = 0; h < kV / 4; ++h) {
      dst[h] = make_float4(in[4 * h], in[4 * h + 1], in[4 * h + 2], in[4 * h + 3]);
    }
  }
}

template <int kV>
__device__ __forceinline__ void StoreVec(__nv_bfloat16* p, int64_t q,
                                         const float* in) {
  if constexpr (kV == 1) {
    p[q] = __float2bfloat16_rn(in[0]);
  } else {
    static_assert(kV % 8 == 0, "bfloat16 vectors are 8 elements");
    uint4* dst = reinterpret_cast<uint4*>(p) + q * (kV / 8);
#pragma unroll
    for (int h = 0; h < kV / 8; ++h) {
      const float* e = in + 8 * h;
      dst[h] = make_uint4(PackBf16(e[0], e[1]), PackBf16(e[2], e[3]),
                          PackBf16(e[4], e[5]), PackBf16(e[6], e[7]));
    }
  }
}

// ---------------------------------------------------------------------------
// Host-side dtype dispatch.

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<float>()) or fn(TypeTag<__nv_bfloat16>()), so a kernel
// is instantiated once per element type.
template <typename Fn>
void DispatchDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      fn(TypeTag<float>());
      return;
    case DType::kBFloat16:
      fn(TypeTag<__nv_bfloat16>());
      return;
  }
  TANDEM_CHECK(false) << "unknown dtype " << static_cast<int>(dtype);
}

// Throws unless every given operand (data not null) has the first one's
// dtype: for kernels that take their operands in one dtype.
inline void CheckOneDType(const char* op,
                          std::initializer_list<std::pair<const char*, CPtr>> operands) {
  const std::pair<const char*, CPtr>* first = nullptr;
  for (const auto& o : operands) {
    if (o.second.data == nullptr) continue;
    if (first == nullptr) {
      first = &o;
      continue;
    }
    TANDEM_CHECK(o.second.dtype == first->second.dtype)
        << op << " on a GPU: " << first->first << " is "
        << DTypeName(first->second.dtype) << " but " << o.first << " is "
        << DTypeName(o.second.dtype) << "; this kernel takes them in one dtype";
  }
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNEL_HELPERS_CUH_
