#include "core/backend.h"

#include "core/check.h"

namespace tandem {

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kIdentity: return "identity";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kTanh: return "tanh";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kSilu: return "silu";
  }
  return "?";
}

std::string ActivationNames() {
  std::string names;
  const size_t n = sizeof(kActivations) / sizeof(kActivations[0]);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) names += i + 1 == n ? " or " : ", ";
    names += ActivationName(kActivations[i]);
  }
  return names;
}

Activation ParseActivation(const std::string& name) {
  for (Activation a : kActivations) {
    if (name == ActivationName(a)) return a;
  }
  TANDEM_CHECK(false) << "unknown activation '" << name << "': expected " << ActivationNames();
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

}  // namespace tandem
