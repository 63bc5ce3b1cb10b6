// Optimizers: SGD (momentum, Nesterov, weight decay) and AdamW.
//
//   SgdParams p;
//   p.lr = 0.1f;
//   p.momentum = 0.9f;
//   Sgd sgd(model.Parameters(), p);
//   sgd.ZeroGrad();  model.Backward(...);  sgd.Step();
//
// Each update is one fused pass per parameter tensor (one kernel on GPU); a
// flat parameter buffer makes it one pass for the whole model. State tensors
// (momentum, Adam moments) are exposed by name for checkpoints.
//
// Sharded state (ZeRO-1, parallel/sharded_optimizer.h): ShardState hands the
// optimizer flat pieces of the parameters (views into the data-parallel
// reducer's buckets) that this worker alone updates; it then keeps state for
// those pieces only, and UpdateShards replaces UpdateParameters and Step.
#ifndef TANDEM_LAYERS_OPTIMIZER_H_
#define TANDEM_LAYERS_OPTIMIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "layers/layer.h"

namespace tandem {

// A flat piece of parameters that one worker updates: `value` [n] float32,
// a view into a flat buffer of parameter values, and `grad` [n], the same
// elements' gradient. `name` keys its state ("bucket2.shard1of4").
struct ParameterShard {
  std::string name;
  Tensor value;
  Tensor grad;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<NamedParameter> params);
  virtual ~Optimizer() = default;

  // One step: every parameter updated from its gradient on the main lane of
  // its device, and the step counted. Refused with sharded state.
  virtual void Step();
  // Zeroes every gradient, on the main lane.
  void ZeroGrad();
  virtual std::string Name() const = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;

  // Steps taken so far.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  // Named state tensors ("fc1.weight.momentum", ...), for checkpoints. With
  // sharded state, the shards' ("bucket2.shard1of4.adam_m"): this worker's
  // part only (see docs/parallel.md, "Sharded optimizer state").
  std::vector<std::pair<std::string, Tensor*>> State();
  // Bytes of state this worker holds (momentum, Adam moments): with sharded
  // state, its shards' only.
  int64_t state_bytes();
  const std::vector<NamedParameter>& parameters() const { return params_; }

  // Sharded state (ZeRO-1): from now on the optimizer updates `shards` and
  // keeps state for them alone, freeing that of parameters(); Step,
  // UpdateParameters and SGD's in-backward update are refused. Before the
  // first step only (the state of a step taken would be lost).
  void ShardState(std::vector<ParameterShard> shards);
  bool sharded() const { return sharded_; }
  const std::vector<ParameterShard>& shards() const { return shards_; }
  // Updates shards `indices` (into shards()) on `lane`, as UpdateParameters
  // does parameters: no working copy is written (the caller gathers the
  // values and refreshes them) and nothing is counted (FinishStep counts).
  void UpdateShards(const std::vector<size_t>& indices, const Lane& lane);

  // A step in parts, for callers that update some parameters early (the
  // data-parallel reducer updates each bucket once it is reduced:
  // parallel/comm_hook.h). UpdateParameters updates parameters `indices`
  // (into parameters()) on `lane`, a lane of their device, as the coming
  // step would, and counts nothing; the caller orders `lane` after the
  // gradients. FinishStep counts the step once every parameter is updated.
  void UpdateParameters(const std::vector<size_t>& indices, const Lane& lane);
  void FinishStep() { ++steps_; }

 protected:
  // What an optimizer defines. A slot is one tensor of parameters with its
  // state: a parameter, or with sharded state a shard.
  // Replaces every slot's state with zeroed state for tensors of `shapes`
  // on `device` (none: no state).
  virtual void ResetState(const std::vector<Shape>& shapes, Device device) = 0;
  // Updates `value` from `grad` with slot `slot`'s state on `lane`, writing
  // `working` (optional) too; `step` is the step being taken, from 1.
  virtual void UpdateSlot(const Lane& lane, int64_t step, size_t slot, Tensor& value,
                          const Tensor& grad, Tensor* working) = 0;
  // Slot `slot`'s state tensors, each with the suffix of its name
  // (".adam_m").
  virtual std::vector<std::pair<std::string, Tensor*>> SlotState(size_t slot) = 0;
  // "optimizer 'adamw' keeps sharded state ... : <what>", for refusals.
  void CheckNotSharded(const char* what) const;
  const char* UpdateRangeName() const;

  std::vector<NamedParameter> params_;
  int64_t steps_ = 0;

 private:
  bool sharded_ = false;
  std::vector<ParameterShard> shards_;
};

// Plain SGD may also run inside Backward (one worker; see InBackwardUpdate):
//
//   Sgd sgd(model.Parameters(), {0.01f});
//   BackwardArgs args = BackwardArgs::For(device);
//   args.update = sgd.in_backward();      // null unless plain SGD
//   args.grad_mode = GradMode::kOverwrite;
//   model.BackwardWith(loss.Backward(), args);
//   sgd.Step();   // updates any parameter a layer did not update itself,
//                 // from its gradient, and counts the step
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<NamedParameter> params, SgdParams options);
  ~Sgd() override;
  // The update to fold into Backward (BackwardArgs::update), or null when
  // momentum or weight decay need state a layer cannot see.
  // Null too with sharded state: the update then waits for the
  // reduce-scatter of the gradient.
  InBackwardUpdate* in_backward();
  void Step() override;
  std::string Name() const override { return "sgd"; }
  float lr() const override { return options_.lr; }
  void set_lr(float lr) override;

 protected:
  void ResetState(const std::vector<Shape>& shapes, Device device) override;
  void UpdateSlot(const Lane& lane, int64_t step, size_t slot, Tensor& value,
                  const Tensor& grad, Tensor* working) override;
  std::vector<std::pair<std::string, Tensor*>> SlotState(size_t slot) override;

 private:
  class InBackward;
  SgdParams options_;
  std::vector<Tensor> velocity_;  // empty when momentum is 0
  std::unique_ptr<InBackward> in_backward_;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedParameter> params, AdamWParams options);
  std::string Name() const override { return "adamw"; }
  float lr() const override { return options_.lr; }
  void set_lr(float lr) override;

 protected:
  void ResetState(const std::vector<Shape>& shapes, Device device) override;
  void UpdateSlot(const Lane& lane, int64_t step, size_t slot, Tensor& value,
                  const Tensor& grad, Tensor* working) override;
  std::vector<std::pair<std::string, Tensor*>> SlotState(size_t slot) override;

 private:
  AdamWParams options_;
  std::vector<Tensor> m_, v_;
};

// Builds "sgd" or "adamw" by name; errors name the --optimizer and --lr
// flags' values.
struct OptimizerConfig {
  std::string name = "adamw";
  float lr = 1e-3f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.f;
};
// Throws for an unknown name or a bad learning rate / momentum, naming the
// flag, without building anything (to fail before loading data).
void ValidateOptimizerConfig(const OptimizerConfig& config);
std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config,
                                         std::vector<NamedParameter> params);

}  // namespace tandem

#endif  // TANDEM_LAYERS_OPTIMIZER_H_
