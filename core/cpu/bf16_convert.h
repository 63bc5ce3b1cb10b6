// Arrays converted between float32 and bfloat16 bits, with the same bits as
// core/dtype.h's FloatToBFloat16Bits (round to nearest even, NaNs kept
// quiet) and BFloat16BitsToFloat, on the CPU's widest vectors.
//
//   cpu::RoundToBFloat16(floats, bits, n);   // bits[i] = FloatToBFloat16Bits(floats[i])
//   cpu::WidenBFloat16(bits, floats, n);     // floats[i] = BFloat16BitsToFloat(bits[i])
//
// Note [Conversion vectors]
// Rule: on CPUs with AVX-512 (F and BW) the loops run on 512-bit vectors,
// elsewhere on the build's (AVX2 on x86-64); the bits are the same, since
// the conversions are integer operations.
// Mechanism: each loop is compiled twice, once for AVX-512 through a target
// attribute, and the first call picks one from the CPU's feature flags.
#ifndef TANDEM_CORE_CPU_BF16_CONVERT_H_
#define TANDEM_CORE_CPU_BF16_CONVERT_H_

#include <cstdint>

namespace tandem {
namespace cpu {

void RoundToBFloat16(const float* in, uint16_t* out, int64_t n);
void WidenBFloat16(const uint16_t* in, float* out, int64_t n);

// Which loops run here: "AVX-512", else the build's, "AVX2" (x86-64) or
// "portable"; the backend's description names it.
const char* ConversionVectors();

// The two variants, for tests: kAvx512 needs a CPU with AVX-512 F and BW
// (HasAvx512Conversions()).
enum class ConversionIsa { kBuild, kAvx512 };
bool HasAvx512Conversions();
void RoundToBFloat16With(ConversionIsa isa, const float* in, uint16_t* out, int64_t n);
void WidenBFloat16With(ConversionIsa isa, const uint16_t* in, float* out, int64_t n);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_BF16_CONVERT_H_
