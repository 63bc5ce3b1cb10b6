// The Layer interface, and what a user implements to add a layer.
//
// A layer owns its parameters and their gradients. Forward caches what
// Backward needs; Backward ADDS into the parameter gradients (so gradient
// accumulation over micro-batches is free) and returns the input gradient.
// Layers know nothing of communication: the data-parallel reducer learns that
// a layer's gradients are ready from the backward loop (Sequential), not from
// the layer; a layer may only say, mid-Backward, that its parameter
// gradients are done (NotifyGradientsQueued).
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

#include <functional>
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

// Where Backward puts a layer's parameter gradients.
//   kAccumulate: added to the gradient tensors (the default), so several
//     backward passes (micro-batches) accumulate between ZeroGrad calls.
//   kOverwrite: written over them; no ZeroGrad is needed, and no gradient is
//     read back, when each step has one backward pass.
//   kApplySgd: Backward writes each gradient and applies plain SGD to its
//     parameters at once (p -= lr * dL/dp), layer by layer, instead of one
//     optimizer pass after backward: on a GPU the updates then run beside
//     the next layers' backward GEMMs. Only for plain SGD (no momentum or
//     weight decay) with nothing that must see the gradients before the
//     update (no all-reduce, no clipping): see Sgd::FuseIntoBackward.
struct GradTarget {
  enum Kind { kAccumulate, kOverwrite, kApplySgd };
  Kind kind = kAccumulate;
  float lr = 0.f;  // kApplySgd only

  static GradTarget Accumulate() { return {kAccumulate, 0.f}; }
  static GradTarget Overwrite() { return {kOverwrite, 0.f}; }
  static GradTarget ApplySgd(float lr) { return {kApplySgd, lr}; }
};
const char* GradTargetName(GradTarget::Kind kind);

class Layer {
 public:
  virtual ~Layer() = default;

  // x: [batch, ...] -> y: [batch, ...].
  virtual Tensor Forward(const Tensor& x) = 0;
  // dy: gradient of the loss w.r.t. the last Forward's output. Adds into
  // parameter gradients and returns the gradient w.r.t. its input.
  virtual Tensor Backward(const Tensor& dy) = 0;
  // Backward(dy), calling `on_gradients_queued` exactly once, as soon as the
  // parameter gradients are all queued: from inside Backward where the layer
  // says so (NotifyGradientsQueued), else right after Backward returns.
  // Sequential uses it so that the data-parallel reducer can start reducing
  // a layer's gradients while the layer still computes its input gradient.
  Tensor BackwardNotifying(const Tensor& dy,
                           const std::function<void()>& on_gradients_queued);
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

  // Switches where Backward puts gradients (GradTarget). Returns false, and
  // changes nothing, when the layer cannot: the default accepts any target
  // for a layer without parameters and only kAccumulate otherwise, so a
  // custom layer that adds into its gradients stays correct. Layers that
  // implement the other targets override this (Linear, Sequential).
  virtual bool SetGradTarget(GradTarget target);
  const GradTarget& grad_target() const { return grad_target_; }

  // A hint for Backward (default false): compute the parameter gradients
  // before the input gradient instead of beside it. Data parallelism sets it
  // on the layers nearest the input (ReducerOptions::gradients_first_layers):
  // backward reaches their gradients last, and their all-reduce can then run
  // beside the input-gradient GEMM rather than after it. Layers may ignore
  // it; Linear honours it. Sequential passes it on to its layers.
  virtual void SetGradientsFirst(bool first) { gradients_first_ = first; }
  bool gradients_first() const { return gradients_first_; }

 protected:
  virtual void OnModeChange() {}
  // Optional, for Backward implementations: every parameter gradient of this
  // Backward is now written (or queued on the device), and the rest of
  // Backward only computes the input gradient. From here the gradients may
  // be all-reduced, read and overwritten, beside the rest of Backward, so it
  // must not touch them again; it may still read the parameters, which
  // nothing changes before Backward returns. A layer that never calls it is
  // treated as calling it on return. Linear calls it between its
  // weight-gradient and input-gradient GEMMs. Outside BackwardNotifying it
  // does nothing.
  void NotifyGradientsQueued();
  // For overrides of SetGradTarget that accept `target`.
  void set_grad_target(GradTarget target) { grad_target_ = target; }

 private:
  bool training_ = true;
  bool needs_input_grad_ = true;
  bool gradients_first_ = false;
  GradTarget grad_target_;
  // Set only inside BackwardNotifying; cleared once called.
  const std::function<void()>* on_gradients_queued_ = nullptr;
};

// Sets every gradient of `layer` to zero.
void ZeroGrad(Layer& layer);
// Moves parameters (and zeroed gradients) of `layer` to `device`.
void MoveTo(Layer& layer, Device device);
// Total number of parameter elements.
int64_t ParameterCount(Layer& layer);

}  // namespace tandem

#endif  // TANDEM_LAYERS_LAYER_H_
