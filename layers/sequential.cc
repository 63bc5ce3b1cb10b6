#include "layers/sequential.h"

#include <sstream>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Layer& Sequential::Add(std::unique_ptr<Layer> layer) {
  TANDEM_CHECK(layer != nullptr) << "Sequential '" << name_ << "': null layer";
  for (const auto& existing : layers_) {
    TANDEM_CHECK(existing->Name() != layer->Name())
        << "Sequential '" << name_ << "' already has a layer named '"
        << layer->Name() << "': names must be unique (they key checkpoints)";
  }
  layer->SetTraining(training());
  TANDEM_CHECK(layer->SetGradTarget(grad_target()))
      << "Sequential '" << name_ << "' writes gradients as "
      << GradTargetName(grad_target().kind) << ", which layer '"
      << layer->Name() << "' cannot do: add layers before SetGradTarget";
  if (layers_.empty() && !needs_input_grad()) layer->SetNeedsInputGrad(false);
  layers_.push_back(std::move(layer));
  return *layers_.back();
}

void Sequential::SetNeedsInputGrad(bool needed) {
  Layer::SetNeedsInputGrad(needed);
  if (!layers_.empty()) layers_.front()->SetNeedsInputGrad(needed);
}

void Sequential::SetGradientsFirst(bool first) {
  Layer::SetGradientsFirst(first);
  for (auto& layer : layers_) layer->SetGradientsFirst(first);
}

bool Sequential::SetGradTarget(GradTarget target) {
  const GradTarget before = grad_target();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i]->SetGradTarget(target)) {
      // All or nothing: put back the ones already switched.
      for (size_t j = 0; j < i; ++j) layers_[j]->SetGradTarget(before);
      return false;
    }
  }
  set_grad_target(target);
  return true;
}

Tensor Sequential::Forward(const Tensor& x, const LayerDoneFn& on_layer_done) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i]->Forward(h);
    if (on_layer_done) on_layer_done(i);
  }
  return h;
}

Tensor Sequential::Backward(const Tensor& dy, const LayerDoneFn& on_layer_done) {
  return Backward(dy, BackwardHooks{nullptr, on_layer_done});
}

Tensor Sequential::Backward(const Tensor& dy, const BackwardHooks& hooks) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (hooks.on_gradients_queued) {
      g = layers_[i]->BackwardNotifying(g, [&] { hooks.on_gradients_queued(i); });
    } else {
      g = layers_[i]->Backward(g);
    }
    if (hooks.on_layer_done) hooks.on_layer_done(i);
  }
  // Layers may leave parameter work on the side lane (Linear's weight
  // gradients); after Backward everything is in the main lane's order, so
  // callers (optimizers, host reads) need not know about lanes.
  ops::JoinSideLane(dy.device());
  return g;
}

std::vector<Parameter> Sequential::Parameters() {
  std::vector<Parameter> params;
  for (auto& layer : layers_) {
    for (Parameter& p : layer->Parameters()) params.push_back(p);
  }
  return params;
}

std::string Sequential::Describe() const {
  std::ostringstream out;
  out << name_ << " (Sequential:";
  for (size_t i = 0; i < layers_.size(); ++i) {
    out << (i ? ", " : " ") << layers_[i]->Describe();
  }
  out << ")";
  return out.str();
}

void Sequential::OnModeChange() {
  for (auto& layer : layers_) layer->SetTraining(training());
}

}  // namespace tandem
