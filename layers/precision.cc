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

Precision ParsePrecision(const std::string& text) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    if (text == PrecisionName(p)) return p;
  }
  TANDEM_CHECK(false) << "--precision=" << text << " is not a precision: use fp32, tf32 or bf16";
  return Precision::kFp32;
}

}  // namespace tandem
