#include "layers/precision.h"

#include "core/check.h"

namespace tandem {

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

std::string PrecisionPolicy::Describe(const Backend& backend) const {
  std::string text = PrecisionName(precision);
  if (bf16() && compute_dtype(backend) == DType::kFloat32) {
    text += " (computed in float32: the device does not multiply bfloat16)";
  }
  return text;
}

Precision ParsePrecision(const std::string& text) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    if (text == PrecisionName(p)) return p;
  }
  TANDEM_CHECK(false) << "--precision=" << text << " is not a precision: use fp32, tf32 or bf16";
  return Precision::kFp32;
}

}  // namespace tandem
