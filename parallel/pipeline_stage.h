// Internal to parallel/pipeline: one stage of one replica. The stage's model
// is a Sequential of StageLayer proxies over its range of the real model's
// layers (Note [Stage models] in pipeline_stage.cc); a StageWorker runs the
// GPipe schedule of that stage on its device, one host thread per worker
// (Note [Recompute]).
//
//   StageWorker w(replica, stage, stages, device, model, first, end);
//   w.fwd_in = &activations_from_previous;   // HandoffLinks, set by Pipeline
//   w.Setup(options);                        // on the worker's thread
//   w.RunStep(micro_batches, global_batch);  // every step
#ifndef TANDEM_PARALLEL_PIPELINE_STAGE_H_
#define TANDEM_PARALLEL_PIPELINE_STAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/lane.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "parallel/communicator.h"
#include "parallel/pipeline.h"
#include "parallel/pipeline_handoff.h"
#include "parallel/reducer.h"

namespace tandem {
namespace internal {

// A stage's view of one layer of the model: forwards Forward, both forms of
// backward (Backward and BackwardWith, so a layer's own full form, such as
// Linear's, still runs), Parameters, State and names to the real layer,
// which is its one child (so the training mode reaches it, and a walk of the
// stage's tree, the reducer's, reaches every layer inside it). See Note
// [Stage models].
class StageLayer final : public Layer {
 public:
  explicit StageLayer(Layer& target) : target_(target) {}
  Tensor Forward(const Tensor& x) override { return target_.Forward(x); }
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args) override {
    return target_.ForwardWith(x, args);
  }
  Tensor Backward(const Tensor& dy) override { return target_.Backward(dy); }
  // The real layer reported to args.hooks as its container would report it.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    Tensor dx = BackwardReported(target_, dy, args);
    if (args.on_params_ready) args.on_params_ready();
    return dx;
  }
  std::vector<NamedParameter> Parameters() override { return target_.Parameters(); }
  std::vector<StateWord> State() override { return target_.State(); }
  std::string Name() const override { return target_.Name(); }
  std::string Describe() const override { return target_.Describe(); }
  std::vector<Layer*> Children() override { return {&target_}; }

 private:
  Layer& target_;
};

// A stage's busy time in one step: timing events around each interval,
// recorded on the stage's lane. On a GPU they time the device's work, not
// the host's queueing of it; on the CPU they are host-clock time points,
// which there is the same thing. One code path for both.
class StageTimer {
 public:
  // `slots` intervals per step on `lane`; nothing is recorded unless
  // `enabled`.
  void Init(const Lane& lane, int slots, bool enabled);
  void NewStep();
  void Begin(int slot);
  void End(int slot);
  // The sum of this step's intervals; waits for the device.
  double BusySeconds() const;
  bool enabled() const { return enabled_; }

 private:
  Lane lane_;
  bool enabled_ = false;
  std::vector<std::unique_ptr<LaneEvent>> starts_, stops_;
  std::vector<bool> used_;
};

// One stage of one replica: its layers, links, optimizer and per-step state.
// Every method but the constructor runs on the worker's own thread, one at
// a time (the Pipeline hands it phases).
struct StageWorker {
  // Stage `stage` of `stages` of `replica`, layers [first, end) of `model`.
  StageWorker(int replica, int stage, int stages, Device device,
              Sequential& model, size_t first, size_t end);

  // "stage 1 of replica 0 (cuda:1)"
  std::string Label() const;
  // Moves the layers to the device; builds the reducer (when the stage has
  // a replica group), the optimizer, the loss (last stage) and the timer.
  // The reducer broadcasts replica 0's parameters: every replica of the
  // stage runs Setup at once.
  void Setup(const PipelineOptions& options);
  // The GPipe schedule of this stage for one step: every forward, then
  // every backward, then the optimizer. Needs `inputs` (first stage) and
  // `targets` (last stage), one per micro-batch.
  void RunStep(int micro_batches, int64_t global_batch);

  const int replica;
  const int stage;
  const Device device;
  const bool first;
  const bool last;
  std::vector<Layer*> layers;      // the real layers, owned by the model
  std::vector<StateWord> state;    // the layers' (Layer::State): Note [Recompute]
  std::unique_ptr<Sequential> stage_model;  // of StageLayer proxies

  // Set by the Pipeline before Setup.
  HandoffLink* fwd_in = nullptr;   // activations from stage - 1
  HandoffLink* fwd_out = nullptr;  // activations to stage + 1
  HandoffLink* bwd_in = nullptr;   // gradients from stage + 1
  HandoffLink* bwd_out = nullptr;  // gradients to stage - 1
  std::vector<Communicator*> comms;  // the stage's replica group; empty: none

  // Set by Pipeline::Step before each step.
  std::vector<Tensor> inputs, targets;

  // Set by Setup.
  Lane lane;  // the device's main lane: see Note [Stage lane]
  std::unique_ptr<Reducer> reducer;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Loss> loss;
  StageTimer timer;

  // Written by RunStep, read by the Pipeline between steps.
  Tensor loss_total;  // [1], last stage: the sum of its micro-batch losses

 private:
  void BeginStep(int micro_batches);
  void Forward(int micro, int64_t global_batch);
  void Backward(int micro, int micro_batches);
  Tensor BackwardThroughStage(const Tensor& grad, bool sync);
  // `t` on this stage's device (a handle when it is there already).
  Tensor Local(const Tensor& t) const;
  void SaveState(std::vector<uint64_t>& values) const;
  void RestoreState(const std::vector<uint64_t>& values);

  std::vector<Tensor> saved_;    // the stage's input of each micro-batch
  std::vector<Tensor> dlogits_;  // last stage: the loss gradient of each
  std::vector<std::vector<uint64_t>> state_before_;  // [micro][state word]
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_PARALLEL_PIPELINE_STAGE_H_
