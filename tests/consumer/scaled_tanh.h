// A custom layer of this workspace, written against Tandem's public op set
// (docs/custom_layers.md): y = gain * tanh(x), a tanh whose output scale each
// feature learns (gain [features], starting at 1). It runs on CPU and GPU
// without knowing which, in a float32 or a bf16 model (it computes in float32
// and casts at its edges).
//
//   consumer::ScaledTanh act("act", 32);
//   Tensor y = act.Forward(x);      // x [batch, 32]
//   Tensor dx = act.Backward(dy);   // adds into act.gain's gradient
#ifndef TANDEM_CONSUMER_SCALED_TANH_H_
#define TANDEM_CONSUMER_SCALED_TANH_H_

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace consumer {

using tandem::Tensor;
namespace ops = tandem::ops;

class ScaledTanh : public tandem::Layer {
 public:
  ScaledTanh(std::string name, int64_t features, tandem::Device device = tandem::Device::Cpu())
      : name_(std::move(name)), features_(features) {
    gain_ = tandem::Parameter(Tensor::Full({features}, 1.f, device));  // gradient: zeros
  }

  Tensor Forward(const Tensor& x_in) override {  // x [batch, features]
    TANDEM_CHECK(x_in.rank() == 2 && x_in.dim(1) == features_)
        << "layer '" << name_ << "' got input " << tandem::ShapeToString(x_in.shape())
        << ": expected [batch, " << features_ << "]";
    const Tensor x = ops::ToDType(x_in, tandem::DType::kFloat32);
    Tensor t = Tensor::Empty(x.shape(), x.device());
    ops::ActivationForward(tandem::Activation::kTanh, x, t);  // t = tanh(x)
    Tensor y = Tensor::Empty(x.shape(), x.device());
    ops::BroadcastMul(t, gain_.value(), tandem::Broadcast::kRow, y);  // y = gain * t
    input_.Save(x);  // after the layer's own writes
    tanh_.Save(t);
    return y;
  }

  Tensor Backward(const Tensor& dy_in) override {  // dy [batch, features]
    const Tensor dy = ops::ToDType(dy_in, tandem::DType::kFloat32);
    const Tensor& x = input_.Get(*this);  // throws if written since Forward
    const Tensor& t = tanh_.Get(*this);
    Tensor g = Tensor::Empty(dy.shape(), dy.device());
    ops::Mul(dy, t, g);
    ops::ColumnSums(g, gain_.grad(), /*beta=*/1.f);                    // dgain += sum of dy * t
    ops::BroadcastMul(dy, gain_.value(), tandem::Broadcast::kRow, g);   // g = dy * gain
    Tensor dx = Tensor::Empty(x.shape(), x.device());
    ops::ActivationBackward(tandem::Activation::kTanh, x, g, dx);  // dx = g * (1 - t^2)
    return dx;
  }

  std::vector<tandem::NamedParameter> Parameters() override {
    return {{name_ + ".gain", &gain_}};
  }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  int64_t features_;
  tandem::Parameter gain_;  // [features], with its gradient
  tandem::SavedTensor input_{"input"}, tanh_{"tanh"};
};

}  // namespace consumer

#endif  // TANDEM_CONSUMER_SCALED_TANH_H_
