#include "core/cpu/bf16_convert.h"

#include <cstring>

#include "core/check.h"

namespace tandem {
namespace cpu {
namespace {

// The loops, written so that GCC vectorises them (no branch: the NaN case is
// a select); inlined into a variant per instruction set below. The same
// arithmetic as FloatToBFloat16Bits and BFloat16BitsToFloat.
inline __attribute__((always_inline)) void RoundLoop(const float* __restrict in,
                                                     uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const uint32_t quiet = (bits >> 16) | 0x40u;
    const bool nan = static_cast<int32_t>(bits & 0x7fffffffu) > 0x7f800000;
    out[i] = static_cast<uint16_t>(nan ? quiet : rounded);
  }
}

inline __attribute__((always_inline)) void WidenLoop(const uint16_t* __restrict in,
                                                     float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

void RoundBuild(const float* in, uint16_t* out, int64_t n) { RoundLoop(in, out, n); }
void WidenBuild(const uint16_t* in, float* out, int64_t n) { WidenLoop(in, out, n); }

using RoundFn = void (*)(const float*, uint16_t*, int64_t);
using WidenFn = void (*)(const uint16_t*, float*, int64_t);

#if defined(__x86_64__)
#define TANDEM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
TANDEM_AVX512 void RoundAvx512(const float* in, uint16_t* out, int64_t n) {
  RoundLoop(in, out, n);
}
TANDEM_AVX512 void WidenAvx512(const uint16_t* in, float* out, int64_t n) {
  WidenLoop(in, out, n);
}
#undef TANDEM_AVX512
constexpr RoundFn kRoundAvx512 = RoundAvx512;
constexpr WidenFn kWidenAvx512 = WidenAvx512;
#else
constexpr RoundFn kRoundAvx512 = nullptr;
constexpr WidenFn kWidenAvx512 = nullptr;
#endif

bool DetectAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

ConversionIsa Chosen() {
  static const ConversionIsa isa = DetectAvx512() ? ConversionIsa::kAvx512 : ConversionIsa::kBuild;
  return isa;
}

// `isa`'s variant of a conversion; `name` is the caller, for the error.
template <typename Fn>
Fn Variant(ConversionIsa isa, Fn build, Fn avx512, const char* name) {
  if (isa == ConversionIsa::kBuild) return build;
  TANDEM_CHECK(avx512 != nullptr && DetectAvx512())
      << name << ": this CPU has no AVX-512 (F and BW)";
  return avx512;
}

}  // namespace

bool HasAvx512Conversions() { return DetectAvx512(); }

const char* ConversionVectors() {
  if (Chosen() == ConversionIsa::kAvx512) return "AVX-512";
#if defined(__AVX2__)
  return "AVX2";
#else
  return "portable";
#endif
}

void RoundToBFloat16With(ConversionIsa isa, const float* in, uint16_t* out, int64_t n) {
  Variant(isa, RoundFn{RoundBuild}, kRoundAvx512, "RoundToBFloat16With")(in, out, n);
}

void WidenBFloat16With(ConversionIsa isa, const uint16_t* in, float* out, int64_t n) {
  Variant(isa, WidenFn{WidenBuild}, kWidenAvx512, "WidenBFloat16With")(in, out, n);
}

void RoundToBFloat16(const float* in, uint16_t* out, int64_t n) {
  static const RoundFn round =
      Variant(Chosen(), RoundFn{RoundBuild}, kRoundAvx512, "RoundToBFloat16");
  round(in, out, n);
}

void WidenBFloat16(const uint16_t* in, float* out, int64_t n) {
  static const WidenFn widen =
      Variant(Chosen(), WidenFn{WidenBuild}, kWidenAvx512, "WidenBFloat16");
  widen(in, out, n);
}

}  // namespace cpu
}  // namespace tandem
