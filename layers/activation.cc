#include "layers/activation.h"

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

std::string ActivationLayer::Describe() const {
  return name_ + " (" + ActivationName(activation_) + ")";
}

Tensor ActivationLayer::Forward(const Tensor& x) {
  Tensor y = Tensor::Empty(x.shape(), x.device(), x.dtype());
  ops::ActivationForward(activation_, x, y);
  input_.Save(x);
  return y;
}

Tensor ActivationLayer::Backward(const Tensor& dy) {
  const Tensor& input = input_.Get(*this);
  TANDEM_CHECK(dy.shape() == input.shape())
      << "layer '" << Describe() << "' got output gradient "
      << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(input.shape());
  Tensor dx = Tensor::Empty(dy.shape(), dy.device(), dy.dtype());
  ops::ActivationBackward(activation_, input, dy, dx);
  return dx;
}

std::unique_ptr<Layer> MakeRelu(std::string name) {
  return std::make_unique<ActivationLayer>(std::move(name), Activation::kRelu);
}
std::unique_ptr<Layer> MakeGelu(std::string name) {
  return std::make_unique<ActivationLayer>(std::move(name), Activation::kGelu);
}
std::unique_ptr<Layer> MakeTanh(std::string name) {
  return std::make_unique<ActivationLayer>(std::move(name), Activation::kTanh);
}

std::unique_ptr<Layer> MakeSigmoid(std::string name) {
  return std::make_unique<ActivationLayer>(std::move(name), Activation::kSigmoid);
}

std::unique_ptr<Layer> MakeSilu(std::string name) {
  return std::make_unique<ActivationLayer>(std::move(name), Activation::kSilu);
}

}  // namespace tandem
