#include "layers/layer.h"

#include "core/ops.h"

namespace tandem {

const char* GradTargetName(GradTarget::Kind kind) {
  switch (kind) {
    case GradTarget::kAccumulate: return "accumulate";
    case GradTarget::kOverwrite: return "overwrite";
    case GradTarget::kApplySgd: return "apply-sgd";
  }
  return "?";
}

bool Layer::SetGradTarget(GradTarget target) {
  if (target.kind != GradTarget::kAccumulate && !Parameters().empty()) {
    return false;
  }
  grad_target_ = target;
  return true;
}

void ZeroGrad(Layer& layer) {
  for (Parameter& p : layer.Parameters()) {
    ops::JoinSideLane(p.grad->device());  // free unless Backward left work
    ops::Fill(*p.grad, 0.f);
  }
}

void MoveTo(Layer& layer, Device device) {
  for (Parameter& p : layer.Parameters()) {
    *p.value = p.value->To(device);
    *p.grad = Tensor::Zeros(p.value->shape(), device);
  }
}

int64_t ParameterCount(Layer& layer) {
  int64_t n = 0;
  for (Parameter& p : layer.Parameters()) n += p.value->numel();
  return n;
}

}  // namespace tandem
