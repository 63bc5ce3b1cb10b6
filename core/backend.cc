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

}  // namespace tandem
