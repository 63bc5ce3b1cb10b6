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

Tensor Sequential::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    BackwardArgs layer_args = args;
    layer_args.input_grad = i > 0 || args.input_grad;
    g = BackwardChild(*layers_[i], g, layer_args);
  }
  ops::WaitFor(args.lane, args.param_lane);
  if (args.on_params_ready) args.on_params_ready();
  return g;
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
  for (const NamedParameter& p : layer.Parameters()) names.push_back(p.name);
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
