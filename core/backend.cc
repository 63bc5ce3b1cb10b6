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

Lane Backend::ReserveForGemm(const Lane& lane, int multiprocessors) {
  TANDEM_CHECK(multiprocessors >= 0)
      << lane.Describe() << ": a GEMM reserve of " << multiprocessors
      << " multiprocessors; it counts SMs left to other kernels, so 0 or more";
  return lane.Reserved(multiprocessors);
}

void Backend::Synchronize() {
  Synchronize(main_lane());
  Synchronize(side_lane());
}

void Backend::GemmEx(const Lane& lane, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const float* a,
                     const float* b, float beta, const float* c, float* d,
                     const GemmEpilogue& epilogue) {
  if (m <= 0 || n <= 0) return;
  if (beta != 0.f && c != d) {
    CopyDeviceToDevice(lane, c, d, static_cast<size_t>(m * n) * sizeof(float));
  }
  Gemm(lane, trans_a, trans_b, m, n, k, alpha, a, b, beta, d);
  if (epilogue.bias != nullptr) {
    BiasActivation(lane, epilogue.activation, d, epilogue.bias, nullptr, d, m, n);
  } else if (epilogue.activation != Activation::kIdentity) {
    ActivationForward(lane, epilogue.activation, d, d, m * n);
  }
}

}  // namespace tandem
