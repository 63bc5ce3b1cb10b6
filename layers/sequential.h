// Sequential: layers applied in order; the model type Tandem trains.
//
//   Sequential model("mlp");
//   model.Add(std::make_unique<Linear>("fc1", 784, 256, rng, LinearOptions{Activation::kRelu}));
//   model.Add(std::make_unique<Linear>("fc2", 256, 10, rng));
//   Tensor logits = model.Forward(x);
//   model.Backward(dlogits);
//
// The hooks that travel with Backward (BackwardArgs::hooks) are how the
// data-parallel reducer learns that gradients are ready while backward
// continues (parallel/reducer.h); layers themselves never see them.
#ifndef TANDEM_LAYERS_SEQUENTIAL_H_
#define TANDEM_LAYERS_SEQUENTIAL_H_

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace tandem {

class Sequential : public Layer {
 public:
  explicit Sequential(std::string name = "model") : name_(std::move(name)) {}

  // Appends a layer. Its name, and the names of its parameters and state
  // words, must be new to this model (they key checkpoints; Note [Parameter names] in
  // layers/layer.h): throws naming both layers otherwise. The layer takes
  // the model's training mode.
  Layer& Add(std::unique_ptr<Layer> layer);
  template <typename L, typename... Args>
  L& Emplace(Args&&... args) {
    return static_cast<L&>(Add(std::make_unique<L>(std::forward<Args>(args)...)));
  }

  Tensor Forward(const Tensor& x) override { return ForwardWith(x, ForwardArgs()); }
  // Each layer in order, through ForwardChild (args.hooks hears of each).
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args) override;

  // Backward from the last layer to the first, each through BackwardChild
  // with `args` (the input gradient of layer i > 0 is always wanted).
  // Before returning, `args.lane` waits for `args.param_lane`, so callers
  // that read gradients or parameters on `args.lane` need not know where
  // layers put their work.
  Tensor Backward(const Tensor& dy) override;
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;

  std::vector<Layer*> Children() override;
  // None: the layers' parameters and state keep their own names.
  std::string ChildPrefix() const override { return ""; }
  std::string Name() const override { return name_; }
  std::string Describe() const override;

  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }

 private:
  void CheckNewNames(Layer& layer);

  std::string name_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_SEQUENTIAL_H_
