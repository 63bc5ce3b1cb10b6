#include "core/dtype.h"

#include "core/check.h"

namespace tandem {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

DType ParseDType(const std::string& text) {
  for (DType d : {DType::kFloat32, DType::kBFloat16}) {
    if (text == DTypeName(d)) return d;
  }
  TANDEM_CHECK(false) << "unknown dtype '" << text << "': expected float32 or bfloat16";
  return DType::kFloat32;
}

}  // namespace tandem
