// The Layer interface, and what a user implements to add a layer.
//
// A layer owns its parameters and their gradients. Forward caches what
// Backward needs; Backward ADDS into the parameter gradients (so gradient
// accumulation over micro-batches is free) and returns the input gradient.
//
//   class Scale : public Layer {
//    public:
//     Tensor Forward(const Tensor& x) override { ... }
//     Tensor Backward(const Tensor& dy) override { ... }
//     std::vector<NamedParameter> Parameters() override { return {{"w", &w_}}; }
//     std::string Name() const override { return name_; }
//   };
//
// That simple Backward is all a layer needs. Callers that want more say so
// per call, with BackwardArgs: which lanes to use, whether the input
// gradient is wanted, whether gradients accumulate or overwrite, a callback
// for the moment the parameter gradients are queued (data parallelism starts
// reducing them then), and an optimizer step to fold into Backward. The
// default BackwardWith(dy, args) serves all of that through the simple form;
// layers that can do better (Linear) override it. Layers know nothing of
// communication.
//
// Keep what Forward saves for Backward (the input, the output) in a
// SavedTensor (layers/saved_tensor.h): an op that writes into it in place
// before Backward then makes Backward throw, naming the layer, instead of
// giving wrong gradients.
//
// A model is a tree of layers. A layer that contains others (Sequential,
// Residual, a user's two-branch block) lists them in Children(), and that is
// all it must do: its parameters and state default to its children's, named
// under its ChildPrefix(), and SetTraining, checkpoints, the reducer and the
// pipeline reach every layer below through that one walk, so a Dropout deep
// inside a model stops dropping at evaluation and resumes where it was.
// Names follow one rule, see Note [Parameter names].
//
// See docs/custom_layers.md and examples/custom_layer/.
#ifndef TANDEM_LAYERS_LAYER_H_
#define TANDEM_LAYERS_LAYER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/lane.h"
#include "core/tensor.h"
#include "layers/parameter.h"

namespace tandem {

// A layer's parameters are Parameter objects (layers/parameter.h), each
// owning its float32 master value, its gradient and its working copy, and
// handed out by Parameters() as NamedParameter handles.
//
// Note [Parameter names]
// A parameter's (or state word's) name keys checkpoints and errors, so a
// model's names are unique. A leaf layer names its parameters "<layer
// name>.<what>" ("fc1.weight"). A layer that contains others prefixes its
// children's names with its ChildPrefix(), by default its own name and a
// dot ("block1.fc.weight"). A Sequential adds no prefix, so the model itself
// (the top Sequential) keeps the names of its layers; a Sequential inside a
// wrapper gets the wrapper's prefix. Sequential::Add refuses a layer whose
// parameter or state names repeat one already in the model, naming both
// layers.
// A word of a layer's state other than its parameters, which a resumed run
// needs to continue bit for bit and a recomputed forward needs to repeat the
// first: a Dropout's position in its mask stream, a step counter. Named as
// parameters are (Note [Parameter names]): "<layer name>.<what>".
struct StateWord {
  std::string name;
  uint64_t* value;
};

// How Backward writes parameter gradients.
enum class GradMode {
  kAccumulate,  // added to the gradients: micro-batches accumulate
  kOverwrite,   // written over them: no ZeroGrad needed, nothing read back
};

// An optimizer step folded into Backward (Sgd::in_backward()): instead of
// writing a parameter's gradient, a layer hands it over here, in the form it
// would have computed it, and the update writes the new parameter value.
// For one worker: nothing else may need the gradients. Every update is in
// place on `lane`, working copy included: the layer calls it after queuing
// every read of `param` and its working copy in this Backward (ordering
// `lane` after them), and reads neither afterwards.
class InBackwardUpdate {
 public:
  virtual ~InBackwardUpdate() = default;
  // The gradient of `param` is op(a) op(b) [param's shape], a GEMM the layer
  // runs with TF32 tensor cores when `tf32`; the update is that GEMM.
  virtual void FromGemm(const Lane& lane, Parameter& param, const Tensor& a,
                        bool trans_a, const Tensor& b, bool trans_b, bool tf32) = 0;
  // The gradient of `param` [cols] is the column sums of x [rows, cols].
  virtual void FromColumnSums(const Lane& lane, Parameter& param,
                              const Tensor& x) = 0;
  // Any other gradient, already computed.
  virtual void FromGradient(const Lane& lane, Parameter& param,
                            const Tensor& grad) = 0;
};

class Layer;
struct BackwardArgs;

// What a caller watching a pass through a model (the reducer, a trace) is
// told of each layer in it, at any depth. Travels with the call
// (BackwardArgs::hooks, ForwardArgs::hooks); every container passes it to
// its children through ForwardChild and BackwardChild, so it reaches every
// layer below. A layer whose pass does not pass it on (a user container
// that implements only the simple Backward) is reported as a whole, its
// children with it. See Note [Reports from the tree].
struct LayerHooks {
  // Before `layer`'s ForwardWith: from now on it may read every parameter
  // of its own and below (the reducer waits there for parameters a sharded
  // step is still gathering).
  std::function<void(Layer& layer)> before_forward;
  // Before `layer`'s BackwardWith: may change its arguments (the reducer
  // gives the layers nearest the input their parameter work on the main
  // lane, and plans GEMMs for the SMs NCCL leaves).
  std::function<void(Layer& layer, BackwardArgs& args)> prepare_backward;
  // Every parameter gradient of `layer` (and of the layers below it) is
  // queued (BackwardArgs::on_params_ready), though its input gradient may
  // still be coming.
  std::function<void(Layer& layer)> on_params_ready;
  // `layer`'s BackwardWith has returned.
  std::function<void(Layer& layer)> on_backward_done;
  // `layer`'s ForwardWith has returned.
  std::function<void(Layer& layer)> on_forward_done;
};

// What the caller of ForwardWith asks for, per call.
struct ForwardArgs {
  const LayerHooks* hooks = nullptr;  // not owned; null: none
};

// What the caller of Backward asks for, per call.
struct BackwardArgs {
  // Where the input gradient, and everything the layer does not put on
  // param_lane, is queued. Its work so far is what Backward starts from.
  Lane lane;
  // Where parameter-gradient work may go, beside `lane` (after ordering
  // itself after it). The same queue as `lane`: the parameter gradients are
  // computed first, on it.
  Lane param_lane;
  // Whether the input gradient is wanted. When false, Backward may return an
  // undefined Tensor (for a model's first layer, whose input is data: a GEMM
  // saved).
  bool input_grad = true;
  GradMode grad_mode = GradMode::kAccumulate;
  // Called once, as soon as every parameter gradient of this Backward is
  // queued (on `lane` or `param_lane`): from inside Backward where the layer
  // knows that moment (Linear: before its input-gradient GEMM), else on
  // return. From then on the gradients may be read or reduced beside the
  // rest of Backward, which must not touch them again.
  std::function<void()> on_params_ready;
  // When set, parameters are updated instead of their gradients written.
  InBackwardUpdate* update = nullptr;
  // Told of this layer's children (and theirs) as BackwardChild runs them;
  // not owned; null: none.
  const LayerHooks* hooks = nullptr;

  // The main lane of `device`, its side lane for parameter work, input
  // gradient wanted, gradients accumulated.
  static BackwardArgs For(Device device);
};

class Layer {
 public:
  virtual ~Layer() = default;

  // x: [batch, ...] -> y: [batch, ...], queued on the main lane.
  virtual Tensor Forward(const Tensor& x) = 0;
  // Forward with the caller's arguments: a container runs its children
  // through ForwardChild(child, x, args). The default is Forward(x).
  virtual Tensor ForwardWith(const Tensor& x, const ForwardArgs& args);
  // The simple form. dy: gradient of the loss w.r.t. the last Forward's
  // output. Adds into the parameter gradients and returns the gradient
  // w.r.t. the input, on the main lane.
  virtual Tensor Backward(const Tensor& dy) = 0;
  // The full form: Backward with the caller's arguments. The default serves
  // any args through the simple form: it orders the main lane after
  // args.lane, clears the gradients first for kOverwrite or an update, runs
  // Backward(dy), hands the gradients to args.update, orders args.lane after
  // the main lane, and calls args.on_params_ready on return. A container
  // that overrides it runs each child through BackwardChild.
  virtual Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args);

  // The parameters of this layer and of every layer below it. The default
  // gives the children's, each name prefixed by ChildPrefix(); a layer with
  // parameters of its own returns them (and its children's, if it has any).
  virtual std::vector<NamedParameter> Parameters();
  // The state words of this layer and of every layer below it; the default
  // gives the children's, prefixed as their parameters are.
  virtual std::vector<StateWord> State();
  // The instance name, e.g. "fc1"; used in errors, checkpoints and traces.
  virtual std::string Name() const = 0;
  // Name and configuration, e.g. "fc1 (Linear 784→512)".
  virtual std::string Describe() const { return Name(); }

  // The layers this one contains or wraps, which share its training mode
  // (Sequential's layers, Residual's inner layer). A wrapper lists them
  // here; it need not handle the mode itself.
  virtual std::vector<Layer*> Children() { return {}; }
  // What the default Parameters() and State() put before the children's
  // names: "<name>." (Residual: "block1.fc.weight"); Sequential puts
  // nothing, so a model keeps its layers' names.
  virtual std::string ChildPrefix() const { return Name() + "."; }

  // Sets the mode of this layer and of every layer below it (Children()),
  // each child before its parent's OnModeChange.
  void SetTraining(bool training);
  bool training() const { return training_; }

 protected:
  // Called by SetTraining after the mode (and the children's) changed: for
  // layers that act on it at once (a view of another layer that is not its
  // child, say).
  virtual void OnModeChange() {}

 private:
  bool training_ = true;
};

// Note [Reports from the tree]
// A container runs each child through ForwardChild and BackwardChild, which
// tell args.hooks of the child: BackwardChild lets prepare_backward change
// the child's arguments, makes the child's on_params_ready report the child,
// and reports it done on return. The container's own args.on_params_ready
// is its caller's, for the container as a whole: it calls it once every
// child has returned. So a layer deep in a model is reported the moment its
// own gradients are queued, and a layer reported as a whole (a container
// that runs its children with the simple Backward) covers those below it: a
// parameter may be reported ready more than once, and counts once.

// Runs `child`'s ForwardWith for a container, telling args.hooks before
// and after.
Tensor ForwardChild(Layer& child, const Tensor& x, const ForwardArgs& args);
// Runs `child`'s BackwardWith for a container with `args` (the container's,
// or changed for the child): args.hooks may change them first, the child's
// on_params_ready reports the child to args.hooks, and args.hooks hears
// when it returns. args.on_params_ready is not passed on: it is the
// container's to call once its children are done.
Tensor BackwardChild(Layer& child, const Tensor& dy, BackwardArgs args);
// The same for a model's top, which its caller runs (the reducer), without
// the profile range that names a child.
Tensor BackwardReported(Layer& model, const Tensor& dy, BackwardArgs args);

// `layer`'s parameters with their names prefixed by `prefix` and a dot:
// what a wrapper's Parameters() returns (Note [Parameter names]).
std::vector<NamedParameter> PrefixedParameters(const std::string& prefix, Layer& layer);
// Sets every gradient of `layer` to zero, on the main lane.
void ZeroGrad(Layer& layer);
// Moves parameters (and zeroed gradients) of `layer` to `device`; working
// copies are rebuilt there from the masters, for the parameters whose
// working copy the layer keeps on `device` (Parameters() after the move).
void MoveTo(Layer& layer, Device device);
// Writes every parameter's value into its working copy (where it has one),
// on the main lane: after something set the values directly (a checkpoint
// restored, rank 0's weights broadcast). A working copy whose shape or
// device differs from its value's (an empty placeholder, say) is first
// allocated anew in its dtype, on the value's device.
void SyncWorkingCopies(Layer& layer);
// Total number of parameter elements.
int64_t ParameterCount(Layer& layer);

}  // namespace tandem

#endif  // TANDEM_LAYERS_LAYER_H_
