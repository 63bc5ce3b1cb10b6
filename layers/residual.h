// Residual: y = x + inner(x), a skip connection around any layer (a Linear,
// or a Sequential block).
//
//   auto body = std::make_unique<Sequential>("body");
//   body->Emplace<Linear>("fc1", 256, 256, rng, LinearOptions{Activation::kRelu});
//   body->Emplace<Dropout>("drop", 0.1f, /*seed=*/7);
//   body->Emplace<Linear>("fc2", 256, 256, rng);
//   model.Emplace<Residual>("block1", std::move(body));
//   // parameters "block1.fc1.weight", ..., "block1.fc2.bias"
//
// The sum goes to a new tensor: the inner layer may have kept its output for
// Backward (Linear with ReLU does), so writing x into it in place would
// change what the inner Backward reads (layers/saved_tensor.h). The inner
// layer's parameters are Residual's, under the prefix "<name>."; its
// training mode follows Residual's (Children()).
#ifndef TANDEM_LAYERS_RESIDUAL_H_
#define TANDEM_LAYERS_RESIDUAL_H_

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"

namespace tandem {

class Residual : public Layer {
 public:
  // `inner` maps [batch, ...] to the same shape.
  Residual(std::string name, std::unique_ptr<Layer> inner);

  // x [batch, ...] -> x + inner(x), a new tensor in inner(x)'s dtype.
  Tensor Forward(const Tensor& x) override { return ForwardWith(x, ForwardArgs()); }
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args) override;
  // dx = dy + inner.Backward(dy), on the main lane, joined.
  Tensor Backward(const Tensor& dy) override;
  // The inner layer's BackwardWith with the caller's args, through
  // BackwardChild (so its lanes, gradient mode and update are the inner
  // layer's to serve), args.on_params_ready once it returns, then dx = dy +
  // its input gradient on args.lane; undefined when !args.input_grad. Like
  // Linear's, nothing joins args.param_lane.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  // Its parameters and state are the inner layer's, named "<name>.<inner
  // name>" (the default ChildPrefix; Note [Parameter names] in
  // layers/layer.h).
  std::vector<Layer*> Children() override { return {inner_.get()}; }
  std::string Name() const override { return name_; }
  // "block1 (Residual: fc (Linear 64→64, relu))"
  std::string Describe() const override;

  Layer& inner() { return *inner_; }

 private:
  std::string name_;
  std::unique_ptr<Layer> inner_;
  Shape input_shape_;  // of the last Forward; empty when none is pending
  bool forward_pending_ = false;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_RESIDUAL_H_
