#include "core/backend.h"

#include "core/check.h"

namespace tandem {

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kIdentity: return "identity";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

Activation ParseActivation(const std::string& name) {
  for (Activation a : {Activation::kIdentity, Activation::kRelu,
                       Activation::kGelu, Activation::kTanh}) {
    if (name == ActivationName(a)) return a;
  }
  TANDEM_CHECK(false) << "unknown activation '" << name
                      << "': expected identity, relu, gelu or tanh";
  return Activation::kIdentity;
}

void Backend::GemmEx(bool trans_a, bool trans_b, int64_t m, int64_t n,
                     int64_t k, float alpha, const float* a, const float* b,
                     float beta, const float* c, float* d,
                     const GemmEpilogue& epilogue) {
  if (m <= 0 || n <= 0) return;
  if (beta != 0.f && c != d) CopyDeviceToDevice(c, d, m * n);
  Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, d);
  if (epilogue.bias != nullptr) {
    BiasActivation(epilogue.activation, d, epilogue.bias, nullptr, d, m, n);
  } else if (epilogue.activation != Activation::kIdentity) {
    ActivationForward(epilogue.activation, d, d, m * n);
  }
}

}  // namespace tandem
