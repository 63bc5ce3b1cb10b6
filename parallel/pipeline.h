// Pipeline parallelism: a model split into stages on consecutive devices, trained on micro-batches with the GPipe schedule (every forward,
// then every backward), one host thread per stage; optionally composed with
// data parallelism when there are more devices than stages.
//
//   Rng rng(0);
//   PipelineOptions options;
//   options.stages = 2;
//   options.micro_batches = 4;
//   options.devices = {Device::Cuda(0), Device::Cuda(1)};  // stage 0, stage 1
//   options.optimizer.name = "sgd";
//   Pipeline pipeline(Mlp({784, 512, 512, 10}, Activation::kRelu, rng), options);
//   for (int step = 0; step < steps; ++step) {
//     pipeline.Step(x, labels);   // x on cuda:0, labels on cuda:1: never waits
//   }
//   float loss = pipeline.LastLoss();  // the one host wait, for the loss
//
// The model is a Sequential whose layers the pipeline groups into stages
// (BalanceStages, or options.boundaries), or a model given as its stages,
// each any layer (a block of a user's own, a Residual, a Sequential):
//   std::vector<std::unique_ptr<Layer>> stages;
//   stages.push_back(std::make_unique<TwoTowers>(...));    // stage 0
//   stages.push_back(std::make_unique<Residual>(...));     // stage 1
//   options.stages = 2;
//   Pipeline pipeline(ModelOfStages(std::move(stages)), options);
//
// What a step does. The global batch is split into `replicas` contiguous
// shards and each shard into `micro_batches` contiguous micro-batches (sizes
// differ by at most one, as parallel/sharding.h splits; each needs at least
// one example). Stage s of each replica runs forward of micro-batches
// 0..M-1 as their activations arrive from stage s-1, then backward in reverse
// order M-1..0 as gradients arrive from stage s+1; the last stage computes the
// loss of each micro-batch normalised by the GLOBAL batch, so accumulated
// gradients equal the full-batch gradient (Note [Gradient averaging] in
// parallel/reducer.cc). With replicas > 1, each stage's replicas all-reduce
// that stage's gradients through a Reducer (overlapped with the last
// micro-batch's backward). Then every stage steps its own optimizer.
//
// Memory: a stage keeps the input of every micro-batch and recomputes its
// forward before that micro-batch's backward, as GPipe's re-materialisation
// does; see Note [Recompute] in pipeline_stage.cc. Every stage after the
// first computes its input gradient for the stage before it; the first
// stage does not (its input is data).
//
// Devices. Stages on different GPUs hand activations and gradients over with
// peer copies queued on the receiving GPU's main lane, ordered by backend
// events: the host never waits for a GPU inside Step (Note [Cross-device
// hand-off] in pipeline_handoff.cc). Stages on the CPU, or on one device,
// pass tensor handles. For a step without host waits, pass x on the first
// stage's device and the targets on the last stage's device; other
// placements are copied, correctly but through the host where they cross
// devices. The pipeline names no device API: events, peer copies and lanes
// come from each device's Backend (core/backend.h), so the same code runs
// on the CPU and on GPUs.
//
// Failures. If a stage throws, Step aborts the others (their hand-offs and
// collectives throw instead of waiting), joins the step and throws
// tandem::Error("pipeline stage <s> of replica <r> (<device>) failed: ...");
// the pipeline cannot take further steps. See Note [Abort] in pipeline.cc.
#ifndef TANDEM_PARALLEL_PIPELINE_H_
#define TANDEM_PARALLEL_PIPELINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "parallel/reducer.h"

namespace tandem {

namespace internal {
class HandoffLink;
class StageReplicaGroups;
struct StageWorker;
}  // namespace internal

struct PipelineOptions {
  int stages = 2;
  int micro_batches = 4;
  // Replica-major: devices[r * stages + s] runs stage s of replica r; its
  // size is stages x replicas (replicas = the number of models given). Empty
  // means every stage on the CPU. A stage's replicas all-reduce with a
  // ThreadCommunicator on CPUs and device communicators
  // (parallel/device_communicators.h) on GPUs, one GPU each.
  std::vector<Device> devices;
  // Layer index at which stages 1..stages-1 begin (strictly increasing, in
  // (0, layers)). Empty: BalanceStages by parameter count.
  std::vector<size_t> boundaries;
  // Each stage's optimizer (MakeOptimizer over that stage's parameters).
  OptimizerConfig optimizer;
  // The last stage's loss; null means softmax cross-entropy.
  std::function<std::unique_ptr<Loss>()> make_loss;
  // For the per-stage gradient all-reduce when replicas > 1.
  ReducerOptions reducer;
  // Measure each stage's busy time per step (LastBusySeconds): timing
  // events on the stage's main lane around its compute, which on a GPU time
  // the device's work and on the CPU read the host clock. Stages sharing a
  // GPU share its main lane, so a stage's intervals there also hold what
  // the other stage queued between its events.
  bool record_timing = false;
  // How long a stage waits for a neighbour's hand-off before the step fails
  // naming the hand-off and micro-batch; after a failure, how long Step
  // waits for the other stages to stop before abandoning them (Note
  // [Abort] in pipeline.cc).
  std::chrono::milliseconds handoff_timeout{300 * 1000};
};

// Stage boundaries (as PipelineOptions::boundaries) that split `model`'s
// layers into `stages` contiguous, non-empty groups whose largest parameter
// count is as small as possible (ties: the earliest boundaries).
std::vector<size_t> BalanceStages(Sequential& model, int stages);

// A model given as its stages: stage s is stages[s], whole, any layer. Its
// parameters and state keep the stages' names, which must be unique across
// stages as in one model (Sequential::Add checks). With options.stages =
// stages.size(), BalanceStages puts each in a stage of its own.
std::unique_ptr<Sequential> ModelOfStages(std::vector<std::unique_ptr<Layer>> stages,
                                          std::string name = "model");

// GPipe's idle fraction with equal stages: (stages - 1) / (micro_batches +
// stages - 1).
double GpipeBubbleFraction(int stages, int micro_batches);

class Pipeline {
 public:
  // One replica: `model` split into options.stages stages.
  Pipeline(std::unique_ptr<Sequential> model, PipelineOptions options);
  // replicas.size() replicas of one architecture (same layers, same
  // parameter shapes), each split the same way; replica 0's parameters are
  // broadcast to the others.
  Pipeline(std::vector<std::unique_ptr<Sequential>> replicas,
           PipelineOptions options);
  // Stops and joins the stage threads. Never throws.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One training step on a global batch: x [batch, ...], targets [batch] or
  // [batch, ...] (whatever the loss takes). Returns once every stage has
  // queued its work; on a GPU the work may still be running.
  void Step(const Tensor& x, const Tensor& targets);

  // The last step's loss: the sum over micro-batches and replicas of the
  // micro-batch losses, i.e. the global batch's mean loss. Waits for the
  // last stages' devices.
  float LastLoss();

  // Seconds each stage of `replica` spent computing its micro-batches in the
  // last step (forward, recompute and backward; not hand-offs, waits or the
  // optimizer). Needs record_timing; waits for the devices.
  std::vector<double> LastBusySeconds(int replica = 0);

  int stages() const { return options_.stages; }
  int replicas() const { return replicas_; }
  int micro_batches() const { return options_.micro_batches; }
  // Steps taken so far.
  int64_t steps() const { return steps_; }
  Device device(int replica, int stage) const;
  // Layers [first, end) of the model make up stage s.
  size_t stage_first_layer(int stage) const { return bounds_[stage]; }
  size_t stage_end_layer(int stage) const { return bounds_[stage + 1]; }
  int64_t stage_parameter_count(int stage);
  // Parameters of one replica, every stage, in model order.
  std::vector<NamedParameter> Parameters(int replica = 0);
  // The whole model of a replica (its layers now live on the stage devices).
  Sequential& model(int replica = 0) { return *models_.at(replica); }

 private:
  enum class Phase { kSetup, kStep };

  void CheckReplicas() const;
  void CheckDevices();
  void SetBoundaries();
  void MakeWorkers();
  void StartWorkers();
  void Stop() noexcept;
  void WorkerLoop(internal::StageWorker& worker);
  // Runs `phase` on `worker`; returns its error ("" on success) and whether
  // the error is a consequence of an abort.
  std::string RunWorkerPhase(internal::StageWorker& worker, Phase phase,
                             bool* consequence);
  void RecordFailure(internal::StageWorker& worker, const std::string& error,
                     bool consequence);
  void RunPhase(Phase phase);
  void AbortAll(const std::string& reason);
  void ReleaseHandoffs();
  void SplitBatch(const Tensor& x, const Tensor& targets);
  // The first failure, else the first consequence; "" if none.
  std::string FailureMessage() const;
  internal::StageWorker& worker(int replica, int stage);

  PipelineOptions options_;
  int replicas_ = 1;
  std::vector<std::unique_ptr<Sequential>> models_;
  std::vector<size_t> bounds_;  // stages + 1 layer indices
  int64_t global_batch_ = 0;
  int64_t steps_ = 0;

  // Declared before workers_: the workers' reducers use the groups.
  std::unique_ptr<internal::StageReplicaGroups> groups_;
  // Per replica and boundary: activations, then gradients.
  std::vector<std::unique_ptr<internal::HandoffLink>> links_;
  std::vector<std::unique_ptr<internal::StageWorker>> workers_;
  std::vector<std::thread> threads_;  // one per worker

  // Phases handed to the worker threads; see WorkerLoop.
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  Phase phase_ = Phase::kSetup;
  int running_ = 0;
  bool stopping_ = false;
  // The first failure that was not a consequence of an abort, and the first
  // that was. See Note [Abort].
  std::string failure_;
  std::string consequence_;
  std::chrono::steady_clock::time_point failed_at_;
  // Stage threads that did not stop within handoff_timeout of a failure:
  // left running, never joined (see Note [Abort]).
  int abandoned_ = 0;
  bool broken_ = false;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_PIPELINE_H_
