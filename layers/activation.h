// Elementwise activation layers: ReLU, GELU (exact, erf), Tanh, Sigmoid,
// SiLU (x sigmoid(x)).
//
//   auto relu = MakeRelu("act1");
//   Tensor y = relu->Forward(x);
//
// Linear can also fuse an activation into its bias add (LinearOptions), which
// Mlp() does; these layers are for models that need them standalone.
#ifndef TANDEM_LAYERS_ACTIVATION_H_
#define TANDEM_LAYERS_ACTIVATION_H_

#include <memory>
#include <string>

#include "core/backend.h"
#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace tandem {

class ActivationLayer : public Layer {
 public:
  ActivationLayer(std::string name, Activation activation)
      : name_(std::move(name)), activation_(activation) {}

  Tensor Forward(const Tensor& x) override;
  Tensor Backward(const Tensor& dy) override;
  std::string Name() const override { return name_; }
  std::string Describe() const override;

 private:
  std::string name_;
  Activation activation_;
  SavedTensor input_{"input"};
};

std::unique_ptr<Layer> MakeRelu(std::string name);
std::unique_ptr<Layer> MakeGelu(std::string name);
std::unique_ptr<Layer> MakeTanh(std::string name);
std::unique_ptr<Layer> MakeSigmoid(std::string name);
std::unique_ptr<Layer> MakeSilu(std::string name);

}  // namespace tandem

#endif  // TANDEM_LAYERS_ACTIVATION_H_
