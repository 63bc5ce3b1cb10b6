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

  // One step: every parameter updated from its gradient on the main lane of
  // its device, and the step counted.
  virtual void Step();
  // Zeroes every gradient, on the main lane.
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

  // A step in parts, for callers that update some parameters early (the
  // data-parallel reducer updates each bucket once it is reduced:
  // parallel/comm_hook.h). UpdateParameters updates parameters `indices`
  // (into parameters()) on `lane`, a lane of their device, as the coming
  // step would, and counts nothing; the caller orders `lane` after the
  // gradients. FinishStep counts the step once every parameter is updated.
  virtual void UpdateParameters(const std::vector<size_t>& indices,
                                const Lane& lane) = 0;
  void FinishStep() { ++steps_; }

 protected:
  std::vector<Parameter> params_;
  int64_t steps_ = 0;
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
  Sgd(std::vector<Parameter> params, SgdParams options);
  ~Sgd() override;
  // The update to fold into Backward (BackwardArgs::update), or null when
  // momentum or weight decay need state a layer cannot see.
  InBackwardUpdate* in_backward();
  void Step() override;
  void UpdateParameters(const std::vector<size_t>& indices,
                        const Lane& lane) override;
  std::string Name() const override { return "sgd"; }
  float lr() const override { return options_.lr; }
  void set_lr(float lr) override;
  std::vector<std::pair<std::string, Tensor*>> State() override;

 private:
  class InBackward;
  SgdParams options_;
  std::vector<Tensor> velocity_;  // empty when momentum is 0
  std::unique_ptr<InBackward> in_backward_;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Parameter> params, AdamWParams options);
  void UpdateParameters(const std::vector<size_t>& indices,
                        const Lane& lane) override;
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
