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

}  // namespace tandem
