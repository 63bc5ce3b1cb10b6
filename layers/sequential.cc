#include "layers/sequential.h"

#include <map>
#include <set>
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
  CheckNewNames(*layer);
  layer->SetTraining(training());
  layers_.push_back(std::move(layer));
  return *layers_.back();
}

Tensor Sequential::ForwardWith(const Tensor& x, const ForwardArgs& args) {
  Tensor h = x;
  for (auto& layer : layers_) h = ForwardChild(*layer, h, args);
  return h;
}

Tensor Sequential::Backward(const Tensor& dy) {
  return BackwardWith(dy, BackwardArgs::For(dy.device()));
}

// Note [Releasing what the parameter lane read]
// A layer whose parameter work runs on another lane leaves the tensors that
// work reads (its input, dz) in BackwardArgs::param_lane_reads. They go back
// to the allocator once args.lane is ordered after that work: kReleaseLag
// layers later, args.lane waits for an event recorded on the parameter lane
// after the layer's Backward. By then the parameter lane has usually done
// that work (it ran beside the layers in between), so the wait rarely
// delays the GPU, and backward holds the tensors of a few layers instead of
// every layer's until the end.
constexpr size_t kReleaseLag = 2;

Tensor Sequential::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  std::vector<std::vector<Tensor>> held(layers_.size());  // per layer
  param_work_done_.resize(layers_.size());
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    BackwardArgs layer_args = args;
    layer_args.input_grad = i > 0 || args.input_grad;
    if (i + kReleaseLag < layers_.size()) {
      ReleaseAfterParamWork(layer_args.lane, i + kReleaseLag, held[i + kReleaseLag]);
    }
    layer_args.param_lane_reads = &held[i];
    g = BackwardChild(*layers_[i], g, layer_args);
    if (!held[i].empty()) RecordParamWork(args.param_lane, i);
  }
  ops::WaitFor(args.lane, args.param_lane);
  if (args.on_params_ready) args.on_params_ready();
  return g;  // `held` goes now, after the join
}

void Sequential::RecordParamWork(const Lane& param_lane, size_t layer) {
  std::unique_ptr<LaneEvent>& event = param_work_done_[layer].event;
  if (event == nullptr || param_work_done_[layer].device != param_lane.device()) {
    event = param_lane.backend().NewEvent(/*timing=*/false);
    param_work_done_[layer].device = param_lane.device();
  }
  param_lane.backend().Record(*event, param_lane);
}

void Sequential::ReleaseAfterParamWork(const Lane& lane, size_t layer,
                                       std::vector<Tensor>& held) {
  if (held.empty()) return;
  lane.backend().Wait(lane, *param_work_done_[layer].event);
  held.clear();
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

std::vector<Layer*> Sequential::Children() {
  std::vector<Layer*> children;
  for (auto& layer : layers_) children.push_back(layer.get());
  return children;
}

namespace {

// The names of `layer`'s parameters and state words, in order.
std::vector<std::string> KeyNames(Layer& layer) {
  std::vector<std::string> names;
  for (const Parameter& p : layer.Parameters()) names.push_back(p.name);
  for (const StateWord& w : layer.State()) names.push_back(w.name);
  return names;
}

}  // namespace

void Sequential::CheckNewNames(Layer& layer) {
  std::map<std::string, const Layer*> owner;  // name -> its layer
  for (const auto& existing : layers_) {
    for (const std::string& name : KeyNames(*existing)) owner[name] = existing.get();
  }
  std::set<std::string> own;
  for (const std::string& name : KeyNames(layer)) {
    TANDEM_CHECK(own.insert(name).second)
        << "Sequential '" << name_ << "': layer " << layer.Describe()
        << " has two parameters or state words named '" << name
        << "': names must be unique (they key checkpoints)";
    const auto found = owner.find(name);
    TANDEM_CHECK(found == owner.end())
        << "Sequential '" << name_ << "': layer " << layer.Describe()
        << " has a parameter or state word named '" << name << "', as layer "
        << found->second->Describe()
        << " already does: names must be unique (they key checkpoints); rename a layer, "
           "or wrap one in a layer that prefixes its names (Residual)";
  }
}

}  // namespace tandem
