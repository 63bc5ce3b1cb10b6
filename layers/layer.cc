#include "layers/layer.h"

#include <utility>

#include "core/backend_registry.h"
#include "core/ops.h"
#include "core/profile_range.h"

namespace tandem {

BackwardArgs BackwardArgs::For(Device device) {
  Backend& backend = GetBackend(device);
  BackwardArgs args;
  args.lane = backend.main_lane();
  args.param_lane = backend.side_lane();
  return args;
}

Tensor Layer::ForwardWith(const Tensor& x, const ForwardArgs&) { return Forward(x); }

Tensor ForwardChild(Layer& child, const Tensor& x, const ForwardArgs& args) {
  if (args.hooks != nullptr && args.hooks->before_forward) args.hooks->before_forward(child);
  Tensor y;
  {
    ProfileRange range([&] { return "forward " + child.Name(); });
    y = child.ForwardWith(x, args);
  }
  if (args.hooks != nullptr && args.hooks->on_forward_done) args.hooks->on_forward_done(child);
  return y;
}

namespace {

// See Note [Reports from the tree]. `range`: a profile range named after
// the layer spans its BackwardWith, on_params_ready (where the reducer starts
// all-reduces) included, on_backward_done not.
Tensor BackwardReporting(Layer& layer, const Tensor& dy, BackwardArgs args, bool range) {
  const LayerHooks* hooks = args.hooks;
  args.on_params_ready = nullptr;
  if (hooks != nullptr) {
    if (hooks->prepare_backward) hooks->prepare_backward(layer, args);
    if (hooks->on_params_ready) {
      args.on_params_ready = [hooks, &layer] { hooks->on_params_ready(layer); };
    }
  }
  Tensor dx;
  if (range) {
    ProfileRange profile([&] { return "backward " + layer.Name(); });
    dx = layer.BackwardWith(dy, args);
  } else {
    dx = layer.BackwardWith(dy, args);
  }
  if (hooks != nullptr && hooks->on_backward_done) hooks->on_backward_done(layer);
  return dx;
}

}  // namespace

Tensor BackwardChild(Layer& child, const Tensor& dy, BackwardArgs args) {
  return BackwardReporting(child, dy, std::move(args), /*range=*/true);
}

Tensor BackwardReported(Layer& model, const Tensor& dy, BackwardArgs args) {
  return BackwardReporting(model, dy, std::move(args), /*range=*/false);
}

Tensor Layer::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  // The simple form runs on the main lane and adds into the gradients.
  const Lane main = ops::MainLaneOf(dy);
  ops::WaitFor(main, args.lane);
  std::vector<NamedParameter> params = Parameters();
  if (args.update != nullptr || args.grad_mode == GradMode::kOverwrite) {
    for (NamedParameter& p : params) ops::Fill(main, p.grad(), 0.f);
  }
  Tensor dx = Backward(dy);
  if (args.update != nullptr) {
    for (NamedParameter& p : params) args.update->FromGradient(main, *p.parameter, p.grad());
  }
  ops::WaitFor(args.lane, main);
  if (args.on_params_ready) args.on_params_ready();
  return dx;
}

namespace {

// What `get` returns for each child of `layer`, names prefixed by the
// layer's ChildPrefix(): the default Parameters() and State().
template <typename Entry, typename Get>
std::vector<Entry> FromChildren(Layer& layer, Get get) {
  std::vector<Entry> entries;
  const std::string prefix = layer.ChildPrefix();
  for (Layer* child : layer.Children()) {
    for (Entry& entry : get(*child)) {
      entry.name = prefix + entry.name;
      entries.push_back(entry);
    }
  }
  return entries;
}

}  // namespace

std::vector<NamedParameter> Layer::Parameters() {
  return FromChildren<NamedParameter>(*this, [](Layer& child) { return child.Parameters(); });
}

std::vector<StateWord> Layer::State() {
  return FromChildren<StateWord>(*this, [](Layer& child) { return child.State(); });
}

void Layer::SetTraining(bool training) {
  training_ = training;
  for (Layer* child : Children()) child->SetTraining(training);
  OnModeChange();
}

std::vector<NamedParameter> PrefixedParameters(const std::string& prefix, Layer& layer) {
  std::vector<NamedParameter> params = layer.Parameters();
  for (NamedParameter& p : params) p.name = prefix + "." + p.name;
  return params;
}

void ZeroGrad(Layer& layer) {
  for (NamedParameter& p : layer.Parameters()) {
    if (p.grad().defined()) ops::Fill(p.grad(), 0.f);
  }
}

void MoveTo(Layer& layer, Device device) {
  // Working copies are rebuilt from the masters below, where the layer
  // computes with them on `device`.
  for (NamedParameter& p : layer.Parameters()) p.parameter->MoveTo(device);
  SyncWorkingCopies(layer);
}

void SyncWorkingCopies(Layer& layer) {
  for (NamedParameter& p : layer.Parameters()) {
    if (p.working() == nullptr) continue;
    Tensor& working = *p.working();
    if (working.shape() != p.value().shape() || working.device() != p.value().device()) {
      working = Tensor::Empty(p.value().shape(), p.value().device(), working.dtype());
    }
    ops::Cast(p.value(), working);
  }
}

int64_t ParameterCount(Layer& layer) {
  int64_t n = 0;
  for (NamedParameter& p : layer.Parameters()) n += p.value().numel();
  return n;
}

}  // namespace tandem
