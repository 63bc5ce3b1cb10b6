// The Layer interface, and what a user implements to add a layer.
//
// A layer owns its parameters and their gradients. Forward caches what
// Backward needs; Backward ADDS into the parameter gradients (so gradient
// accumulation over micro-batches is free) and returns the input gradient.
// Layers know nothing of communication: the data-parallel reducer learns that
// a layer's gradients are ready from the backward loop (Sequential), not from
// the layer.
//
//   class Scale : public Layer {
//    public:
//     Tensor Forward(const Tensor& x) override { ... }
//     Tensor Backward(const Tensor& dy) override { ... }
//     std::vector<Parameter> Parameters() override { return {{"w", &w_, &dw_}}; }
//     std::string Name() const override { return name_; }
//   };
//
// See docs/custom_layers.md and examples/custom_layer/.
#ifndef TANDEM_LAYERS_LAYER_H_
#define TANDEM_LAYERS_LAYER_H_

#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem {

// A named parameter: pointers to the owning layer's value and gradient
// tensors. Pointers (not copies) so that the framework can re-home both into
// flat buffers (e.g. the reducer's gradient buckets) by assigning views.
struct Parameter {
  std::string name;
  Tensor* value;
  Tensor* grad;
};

class Layer {
 public:
  virtual ~Layer() = default;

  // x: [batch, ...] -> y: [batch, ...].
  virtual Tensor Forward(const Tensor& x) = 0;
  // dy: gradient of the loss w.r.t. the last Forward's output. Adds into
  // parameter gradients and returns the gradient w.r.t. its input.
  virtual Tensor Backward(const Tensor& dy) = 0;
  virtual std::vector<Parameter> Parameters() { return {}; }
  // The instance name, e.g. "fc1"; used in errors, checkpoints and traces.
  virtual std::string Name() const = 0;
  // Name and configuration, e.g. "fc1 (Linear 784→512)".
  virtual std::string Describe() const { return Name(); }

  void SetTraining(bool training) { training_ = training; OnModeChange(); }
  bool training() const { return training_; }

  // Whether Backward must return the input gradient (default true). A
  // model's first layer, whose input is data, need not: for Linear that
  // saves a whole GEMM (2.4% of mlp-large's GEMM work, 14% of mlp-small's).
  // A layer told false may return an undefined Tensor from Backward; layers
  // that do not care ignore it. Sequential passes it on to its first layer.
  virtual void SetNeedsInputGrad(bool needed) { needs_input_grad_ = needed; }
  bool needs_input_grad() const { return needs_input_grad_; }

 protected:
  virtual void OnModeChange() {}

 private:
  bool training_ = true;
  bool needs_input_grad_ = true;
};

// Sets every gradient of `layer` to zero.
void ZeroGrad(Layer& layer);
// Moves parameters (and zeroed gradients) of `layer` to `device`.
void MoveTo(Layer& layer, Device device);
// Total number of parameter elements.
int64_t ParameterCount(Layer& layer);

}  // namespace tandem

#endif  // TANDEM_LAYERS_LAYER_H_
