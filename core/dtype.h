// Element types of tensors, and the bfloat16 format on the host.
//
//   Tensor w = Tensor::Zeros({4096, 4096}, device, DType::kBFloat16);
//   DTypeName(w.dtype());                    // "bfloat16"
//   SizeOf(DType::kBFloat16);                // 2
//   uint16_t bits = FloatToBFloat16Bits(0.1f);   // round to nearest even
//   float back = BFloat16BitsToFloat(bits);      // 0.10009765625
//
// bfloat16 keeps float32's 8-bit exponent and 7 of its 23 mantissa bits, so
// it covers float32's range at about 3 significant decimal digits. The
// conversions here are the ones every backend uses (TANDEM_HOST_DEVICE), so
// the CPU and the GPU round alike.
#ifndef TANDEM_CORE_DTYPE_H_
#define TANDEM_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/host_device.h"

namespace tandem {

enum class DType { kFloat32, kBFloat16 };

const char* DTypeName(DType dtype);
// Parses "float32" or "bfloat16"; throws tandem::Error naming the text.
DType ParseDType(const std::string& text);

TANDEM_HOST_DEVICE size_t SizeOf(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 2;
}

// Round to nearest, ties to even; NaN stays NaN (quiet).
TANDEM_HOST_DEVICE uint16_t FloatToBFloat16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

TANDEM_HOST_DEVICE float BFloat16BitsToFloat(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// A float rounded to bfloat16 and back: what storing it in bf16 keeps.
TANDEM_HOST_DEVICE float RoundToBFloat16(float value) {
  return BFloat16BitsToFloat(FloatToBFloat16Bits(value));
}

// An operand as backends see it: memory of the backend's device and the
// type of its elements. Ptr is written, CPtr only read.
struct Ptr {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
};
struct CPtr {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  CPtr() = default;
  CPtr(const void* data, DType dtype) : data(data), dtype(dtype) {}
  CPtr(Ptr p) : data(p.data), dtype(p.dtype) {}  // NOLINT: a Ptr reads as well
};

}  // namespace tandem

#endif  // TANDEM_CORE_DTYPE_H_
