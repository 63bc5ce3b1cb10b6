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

Tensor Layer::BackwardNotifying(const Tensor& dy,
                                const std::function<void()>& on_gradients_queued) {
  // Cleared on every way out, so a later plain Backward notifies nobody.
  struct Reset {
    const std::function<void()>*& slot;
    ~Reset() { slot = nullptr; }
  } reset{on_gradients_queued_};
  on_gradients_queued_ = on_gradients_queued ? &on_gradients_queued : nullptr;
  Tensor dx = Backward(dy);
  NotifyGradientsQueued();  // no-op if Backward already did
  return dx;
}

void Layer::NotifyGradientsQueued() {
  if (on_gradients_queued_ == nullptr) return;
  const std::function<void()>* fn = on_gradients_queued_;
  on_gradients_queued_ = nullptr;  // once per Backward
  (*fn)();
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
