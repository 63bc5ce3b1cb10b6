#include "parallel/pipeline_stage.h"

#include <sstream>
#include <utility>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"

namespace tandem {
namespace internal {

// Note [Stage models]
// ~~~~~~~~~~~~~~~~~~~
// Rule: the user's Sequential stays whole, and each stage trains an ordinary
// Sequential over its share of the layers. Sequential owns its layers and
// cannot give them up, so the pipeline keeps each replica's model (it owns
// the layers) and gives every stage a Sequential of StageLayer proxies for
// its range. A proxy forwards Forward, both backward forms (Backward,
// BackwardWith), Parameters, State and names to the real layer, its one
// child (which takes the stage's training mode), so the Reducer drives the
// stage model's backward, hears of the layers inside the real one, and
// re-homes its gradients into buckets through the same Parameter pointers,
// and the optimizer updates the real layers' tensors.
// Layer i lives on its stage's device (MoveTo in Setup).
//
// Note [Recompute]
// ~~~~~~~~~~~~~~~~
// Our layers cache what Backward needs from their LAST Forward only. GPipe
// runs forwards of micro-batches 0..M-1 before the backward of M-1..0, so by
// the time micro-batch m < M-1 is differentiated its caches are gone. Like
// GPipe's re-materialisation, each stage keeps only its input of every
// micro-batch (the activation that crossed the stage boundary) and runs the
// stage's forward on it again right before that micro-batch's backward. The
// backward of M-1 comes right after its forward, so it needs no recompute:
// a stage computes M + (M - 1) forwards and M backwards per step. Memory per
// stage is M boundary activations plus one micro-batch's internal ones.
// Recomputing must reproduce the first forward bit for bit; every op is
// deterministic, and what a forward changes besides activations is the
// layers' state words (Layer::State: a Dropout's mask counter, at any depth
// of the stage's layers), which we save before each micro-batch's forward
// and restore before its recompute (and restore to the post-forward values
// afterwards, so the next step draws what single-device training would).
//
// Note [Stage lane]
// ~~~~~~~~~~~~~~~~~
// Rule: a stage queues all its work on its device's main lane. Layers'
// Forward and the loss name no lane, so they run there; backward starts
// there (BackwardArgs::For: the main lane, with the side lane for parameter
// gradients, joined back before Sequential::BackwardWith returns); hand-offs
// and timing events are recorded there, after the work they mark; and the
// device's allocations are ordered there (Note [Stream-ordered reuse] in
// core/cuda/caching_allocator.h). Two stages on one GPU therefore share
// one queue and pass tensor handles.
//
// Input gradients. A stage after the first hands its input gradient to the
// stage before, so its backward asks for it (BackwardArgs::input_grad);
// the first stage's input is data, so its first layer skips that GEMM.

void StageTimer::Init(const Lane& lane, int slots, bool enabled) {
  lane_ = lane;
  enabled_ = enabled;
  starts_.clear();
  stops_.clear();
  used_.assign(slots, false);
  if (!enabled_) return;
  Backend& backend = lane.backend();
  for (int i = 0; i < slots; ++i) {
    starts_.push_back(backend.NewEvent(/*timing=*/true));
    stops_.push_back(backend.NewEvent(/*timing=*/true));
  }
}

void StageTimer::NewStep() { used_.assign(used_.size(), false); }

void StageTimer::Begin(int slot) {
  if (!enabled_) return;
  used_[slot] = true;
  lane_.backend().Record(*starts_[slot], lane_);
}

void StageTimer::End(int slot) {
  if (!enabled_) return;
  lane_.backend().Record(*stops_[slot], lane_);
}

double StageTimer::BusySeconds() const {
  double seconds = 0;
  for (size_t i = 0; i < used_.size(); ++i) {
    if (used_[i]) seconds += stops_[i]->ElapsedMsSince(*starts_[i]) / 1000.0;
  }
  return seconds;
}

StageWorker::StageWorker(int replica_index, int stage_index, int stages,
                         Device stage_device, Sequential& model, size_t first_layer,
                         size_t end_layer)
    : replica(replica_index),
      stage(stage_index),
      device(stage_device),
      first(stage_index == 0),
      last(stage_index == stages - 1) {
  stage_model = std::make_unique<Sequential>(model.Name() + ".stage" + std::to_string(stage));
  stage_model->SetTraining(model.training());
  for (size_t i = first_layer; i < end_layer; ++i) {
    Layer& layer = model.layer(i);
    layers.push_back(&layer);
    for (const StateWord& w : layer.State()) state.push_back(w);
    stage_model->Add(std::make_unique<StageLayer>(layer));
  }
}

std::string StageWorker::Label() const {
  std::ostringstream out;
  out << "stage " << stage << " of replica " << replica << " (" << device << ")";
  return out.str();
}

void StageWorker::Setup(const PipelineOptions& options) {
  lane = GetBackend(device).main_lane();
  for (Layer* layer : layers) MoveTo(*layer, device);
  // See Note [Gradient averaging] in reducer.cc: the loss is normalised by
  // the global batch, and the reducer sums.
  if (!comms.empty()) {
    reducer = std::make_unique<Reducer>(*stage_model, comms, options.reducer);
  }
  optimizer = MakeOptimizer(options.optimizer, stage_model->Parameters());
  if (last) {
    loss = options.make_loss ? options.make_loss()
                             : std::make_unique<SoftmaxCrossEntropyLoss>();
    TANDEM_CHECK(loss != nullptr)
        << "pipeline: PipelineOptions::make_loss returned null; return a Loss";
  }
  timer.Init(lane, 2 * options.micro_batches, options.record_timing);
}

void StageWorker::RunStep(int micro_batches, int64_t global_batch) {
  BeginStep(micro_batches);
  for (int m = 0; m < micro_batches; ++m) Forward(m, global_batch);
  std::vector<uint64_t> after_forwards;
  SaveState(after_forwards);
  for (int m = micro_batches - 1; m >= 0; --m) Backward(m, micro_batches);
  RestoreState(after_forwards);
  optimizer->Step();
  inputs.clear();
  targets.clear();
}

void StageWorker::BeginStep(int micro_batches) {
  TANDEM_CHECK(!first || static_cast<int>(inputs.size()) == micro_batches)
      << "pipeline " << Label() << ": " << inputs.size() << " inputs for "
      << micro_batches << " micro-batches";
  TANDEM_CHECK(!last || static_cast<int>(targets.size()) == micro_batches)
      << "pipeline " << Label() << ": " << targets.size() << " targets for "
      << micro_batches << " micro-batches";
  timer.NewStep();
  optimizer->ZeroGrad();
  saved_.assign(micro_batches, Tensor());
  dlogits_.assign(micro_batches, Tensor());
  state_before_.assign(micro_batches, {});
  if (last) loss_total = Tensor::Zeros({1}, device);
}

void StageWorker::Forward(int micro, int64_t global_batch) {
  Tensor in = first ? Local(inputs[micro]) : fwd_in->Receive(micro, lane);
  saved_[micro] = in;
  SaveState(state_before_[micro]);
  timer.Begin(micro);
  Tensor out = stage_model->Forward(in);
  if (last) {
    Tensor micro_loss = loss->Forward(out, Local(targets[micro]), global_batch);
    dlogits_[micro] = loss->Backward();
    ops::Axpy(lane, 1.f, micro_loss, loss_total);
  }
  timer.End(micro);
  if (!last) fwd_out->Send(micro, out, lane);
}

void StageWorker::Backward(int micro, int micro_batches) {
  Tensor grad = last ? dlogits_[micro] : bwd_in->Receive(micro, lane);
  timer.Begin(micro_batches + micro);
  if (micro != micro_batches - 1) {
    // See Note [Recompute].
    RestoreState(state_before_[micro]);
    stage_model->Forward(saved_[micro]);
  }
  // Accumulate locally; all-reduce during the last backward (micro-batch
  // 0), overlapped with it. See parallel/reducer.h.
  Tensor dx = BackwardThroughStage(grad, /*sync=*/micro == 0);
  timer.End(micro_batches + micro);
  saved_[micro] = Tensor();
  dlogits_[micro] = Tensor();
  if (!first) bwd_out->Send(micro, dx, lane);
}

Tensor StageWorker::BackwardThroughStage(const Tensor& grad, bool sync) {
  BackwardArgs args = BackwardArgs::For(device);  // See Note [Stage lane]
  args.input_grad = !first;
  Tensor dx;
  if (reducer) {
    dx = reducer->BackwardWith(
        grad, args, sync ? GradientSync::kReduce : GradientSync::kAccumulateLocally);
  } else {
    dx = stage_model->BackwardWith(grad, args);
  }
  TANDEM_CHECK(first || dx.defined())
      << "pipeline " << Label() << ": the stage's backward returned no input "
      << "gradient, which stage " << stage - 1 << " needs";
  return dx;
}

Tensor StageWorker::Local(const Tensor& t) const {
  return t.device() == device ? t : t.To(device);
}

void StageWorker::SaveState(std::vector<uint64_t>& values) const {
  values.resize(state.size());
  for (size_t i = 0; i < state.size(); ++i) values[i] = *state[i].value;
}

void StageWorker::RestoreState(const std::vector<uint64_t>& values) {
  for (size_t i = 0; i < state.size(); ++i) *state[i].value = values[i];
}

}  // namespace internal
}  // namespace tandem
