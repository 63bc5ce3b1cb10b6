// Sequential: layers applied in order; the model type Tandem trains.
//
//   Sequential model("mlp");
//   model.Add(std::make_unique<Linear>("fc1", 784, 256, rng, LinearOptions{Activation::kRelu}));
//   model.Add(std::make_unique<Linear>("fc2", 256, 10, rng));
//   Tensor logits = model.Forward(x);
//   model.Backward(dlogits, [&](size_t i) { /* layer i is done */ });
//
// The per-layer callbacks of Backward are how the data-parallel reducer
// learns that gradients are ready while backward continues (see
// parallel/reducer.h); layers themselves never see them.
#ifndef TANDEM_LAYERS_SEQUENTIAL_H_
#define TANDEM_LAYERS_SEQUENTIAL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace tandem {

class Sequential : public Layer {
 public:
  explicit Sequential(std::string name = "model") : name_(std::move(name)) {}

  // Appends a layer; its name must be unique within this model.
  Layer& Add(std::unique_ptr<Layer> layer);
  template <typename L, typename... Args>
  L& Emplace(Args&&... args) {
    return static_cast<L&>(Add(std::make_unique<L>(std::forward<Args>(args)...)));
  }

  using LayerDoneFn = std::function<void(size_t layer_index)>;
  Tensor Forward(const Tensor& x) override { return Forward(x, nullptr); }
  // Calls on_layer_done(i) after layer i's forward (used for traces).
  Tensor Forward(const Tensor& x, const LayerDoneFn& on_layer_done);
  Tensor Backward(const Tensor& dy) override { return Backward(dy, nullptr); }
  // Runs backward from the last layer to the first, calling
  // on_layer_done(i) once layer i's Backward has returned.
  Tensor Backward(const Tensor& dy, const LayerDoneFn& on_layer_done);
  struct BackwardHooks {
    // Layer i's parameter gradients are final (queued, on a device), though
    // its input gradient may still be coming: see
    // Layer::NotifyGradientsQueued. Comes before on_layer_done(i).
    LayerDoneFn on_gradients_queued;
    // Layer i's Backward has returned.
    LayerDoneFn on_layer_done;
  };
  Tensor Backward(const Tensor& dy, const BackwardHooks& hooks);

  // Also tells the first layer (now, or when it is added): the input
  // gradient of the model is the first layer's.
  void SetNeedsInputGrad(bool needed) override;
  // Switches every layer, or none when one of them cannot.
  bool SetGradTarget(GradTarget target) override;
  // Sets the hint on every layer.
  void SetGradientsFirst(bool first) override;

  std::vector<Parameter> Parameters() override;
  std::string Name() const override { return name_; }
  std::string Describe() const override;

  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }

 protected:
  void OnModeChange() override;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_SEQUENTIAL_H_
