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
#ifndef TANDEM_LAYERS_OPTIMIZER_H_
#define TANDEM_LAYERS_OPTIMIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "layers/layer.h"

namespace tandem {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Parameter> params);
  virtual ~Optimizer() = default;

  virtual void Step() = 0;
  void ZeroGrad();
  virtual std::string Name() const = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;

  // Steps taken so far.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  // Named state tensors ("fc1.weight.momentum", ...), for checkpoints.
  virtual std::vector<std::pair<std::string, Tensor*>> State() = 0;
  const std::vector<Parameter>& parameters() const { return params_; }
  // The model this optimizer runs inside of (Sgd::FuseIntoBackward), or null.
  Layer* fused_into() const { return fused_into_; }

  // Updates parameters `indices` (into parameters()) from their gradients,
  // as the coming Step() would, and counts no step: for a data-parallel
  // reducer that updates each bucket as soon as its all-reduce is done
  // (Reducer::set_optimizer). Ops go wherever the caller's ops go (on a GPU,
  // the reducer puts them on the bucket's communication stream). Joins
  // nothing: the caller orders it after the gradients.
  virtual void UpdateParameters(const std::vector<size_t>& indices) = 0;
  // While on, Step() only counts the step: whoever turned it on calls
  // UpdateParameters for every parameter once per step instead.
  void set_updates_handed_off(bool handed_off) { updates_handed_off_ = handed_off; }
  bool updates_handed_off() const { return updates_handed_off_; }

 protected:
  // The main lane of each parameter's device waits for the layers' side-lane
  // work (Backend::BeginSideLane) before gradients are read or cleared.
  void JoinParameterWork();

  // Step() for optimizers that update through UpdateParameters.
  void UpdateAllAndCount();

  std::vector<Parameter> params_;
  int64_t steps_ = 0;
  Layer* fused_into_ = nullptr;
  bool updates_handed_off_ = false;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<Parameter> params, SgdParams options);
  // Plain SGD folded into `model`'s Backward (GradTarget::kApplySgd), which
  // must be the model these parameters came from: Backward then updates the
  // parameters itself, Step only counts steps, ZeroGrad does nothing and
  // set_lr reaches the model. For one worker only: nothing may need the
  // gradients (a data-parallel all-reduce does). Returns false, changing
  // nothing, with momentum or weight decay or when a layer cannot do it.
  //
  //   Sgd sgd(model.Parameters(), {0.01f});
  //   sgd.FuseIntoBackward(model);     // then the usual loop, unchanged
  bool FuseIntoBackward(Layer& model);
  // Back to separate Step()s; gradients start from zero.
  void Unfuse();
  void Step() override;
  void UpdateParameters(const std::vector<size_t>& indices) override;
  std::string Name() const override { return "sgd"; }
  float lr() const override { return options_.lr; }
  void set_lr(float lr) override;
  std::vector<std::pair<std::string, Tensor*>> State() override;

 private:
  SgdParams options_;
  std::vector<Tensor> velocity_;  // empty when momentum is 0
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Parameter> params, AdamWParams options);
  void Step() override;
  void UpdateParameters(const std::vector<size_t>& indices) override;
  std::string Name() const override { return "adamw"; }
  float lr() const override { return options_.lr; }
  void set_lr(float lr) override;
  std::vector<std::pair<std::string, Tensor*>> State() override;

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
                                         std::vector<Parameter> params);

}  // namespace tandem

#endif  // TANDEM_LAYERS_OPTIMIZER_H_
