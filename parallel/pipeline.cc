#include "parallel/pipeline.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_groups.h"
#include "parallel/pipeline_handoff.h"
#include "parallel/pipeline_stage.h"
#include "parallel/sharding.h"

namespace tandem {

using internal::HandoffLink;
using internal::StageAbortedError;
using internal::StageReplicaGroups;
using internal::StageWorker;

// Note [Abort]
// ~~~~~~~~~~~~
// Rule: one stage's failure ends the step for every stage, promptly, and
// Step reports the cause, not its echoes. Mechanism: a stage whose work
// throws records its message, then aborts every hand-off link and every
// replica group (AbortAll). A stage's host thread waits for another stage
// only in a HandoffChannel or a collective, and both are abortable: they
// throw StageAbortedError or CollectiveAbortedError, which the stage
// records as a consequence. Device-side order between stages is event
// waits queued on lanes, never a host wait (where a hand-off crosses device
// kinds, Tensor::To waits for work already queued on the producer's device,
// which finishes on its own). Step joins every stage, releases the
// hand-offs, and throws the first failure (the first consequence only if no
// stage failed for its own reason); the pipeline is then broken. The
// failure is recorded before the abort, so the consequences it causes come
// second whatever their type.
//
// A stage that stops without throwing (stuck in its own code) is met by its
// neighbours' hand-off deadline (PipelineOptions::handoff_timeout), whose
// error names the hand-off and the micro-batch. A stage still running
// handoff_timeout after a failure cannot be interrupted: Step stops waiting
// for it, names how many were abandoned, and the pipeline never joins
// their threads (end the process to stop them).

std::unique_ptr<Sequential> ModelOfStages(std::vector<std::unique_ptr<Layer>> stages,
                                          std::string name) {
  auto model = std::make_unique<Sequential>(std::move(name));
  for (std::unique_ptr<Layer>& stage : stages) model->Add(std::move(stage));
  return model;
}

std::vector<size_t> BalanceStages(Sequential& model, int stages) {
  const size_t layers = model.size();
  TANDEM_CHECK(stages >= 1) << "pipeline: stages must be at least 1, got " << stages;
  TANDEM_CHECK(layers >= static_cast<size_t>(stages))
      << "pipeline: model '" << model.Name() << "' has " << layers
      << " layer(s), too few for " << stages
      << " stages (each stage needs at least one layer)";
  std::vector<int64_t> prefix(layers + 1, 0);
  for (size_t i = 0; i < layers; ++i) {
    prefix[i + 1] = prefix[i] + ParameterCount(model.layer(i));
  }
  // best[k][i]: the smallest largest-stage count splitting layers [0, i) into
  // k stages; from[k][i]: where the last of them begins.
  const int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(layers + 1, kInf));
  std::vector<std::vector<size_t>> from(stages + 1, std::vector<size_t>(layers + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (size_t i = k; i <= layers; ++i) {
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf) continue;
        const int64_t cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (cost < best[k][i]) {
          best[k][i] = cost;
          from[k][i] = j;
        }
      }
    }
  }
  std::vector<size_t> boundaries(stages - 1);
  size_t end = layers;
  for (int k = stages; k > 1; --k) {
    end = from[k][end];
    boundaries[k - 2] = end;
  }
  return boundaries;
}

double GpipeBubbleFraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

Pipeline::Pipeline(std::unique_ptr<Sequential> model, PipelineOptions options)
    : Pipeline(
          [&] {
            std::vector<std::unique_ptr<Sequential>> replicas;
            replicas.push_back(std::move(model));
            return replicas;
          }(),
          std::move(options)) {}

Pipeline::Pipeline(std::vector<std::unique_ptr<Sequential>> replicas,
                   PipelineOptions options)
    : options_(std::move(options)),
      replicas_(static_cast<int>(replicas.size())),
      models_(std::move(replicas)) {
  TANDEM_CHECK(options_.stages >= 1)
      << "pipeline: stages must be at least 1, got " << options_.stages;
  TANDEM_CHECK(options_.micro_batches >= 1)
      << "pipeline: micro_batches must be at least 1, got " << options_.micro_batches;
  TANDEM_CHECK(options_.handoff_timeout.count() > 0)
      << "pipeline: handoff_timeout must be positive, got " << options_.handoff_timeout.count()
      << " ms";
  CheckReplicas();
  CheckDevices();
  SetBoundaries();
  groups_ = std::make_unique<StageReplicaGroups>(options_.devices, options_.stages, replicas_);
  MakeWorkers();
  StartWorkers();
}

void Pipeline::CheckReplicas() const {
  TANDEM_CHECK(replicas_ >= 1) << "pipeline: no model given";
  for (int r = 0; r < replicas_; ++r) {
    TANDEM_CHECK(models_[r] != nullptr) << "pipeline: replica " << r << "'s model is null";
  }
  Sequential& reference = *models_[0];
  for (int r = 1; r < replicas_; ++r) {
    Sequential& other = *models_[r];
    TANDEM_CHECK(other.size() == reference.size())
        << "pipeline: replica " << r << "'s model has " << other.size()
        << " layers but replica 0's has " << reference.size()
        << ": replicas must share one architecture";
    for (size_t i = 0; i < reference.size(); ++i) {
      std::vector<NamedParameter> a = reference.layer(i).Parameters();
      std::vector<NamedParameter> b = other.layer(i).Parameters();
      bool same = a.size() == b.size() && reference.layer(i).Name() == other.layer(i).Name();
      for (size_t p = 0; same && p < a.size(); ++p) {
        same = a[p].value().shape() == b[p].value().shape();
      }
      TANDEM_CHECK(same) << "pipeline: layer " << i << " of replica " << r << " is '"
                         << other.layer(i).Describe() << "' but replica 0's is '"
                         << reference.layer(i).Describe()
                         << "': replicas must share one architecture";
    }
  }
}

void Pipeline::CheckDevices() {
  const int stages = options_.stages;
  const size_t workers = static_cast<size_t>(stages) * replicas_;
  if (options_.devices.empty()) options_.devices.assign(workers, Device::Cpu());
  TANDEM_CHECK(options_.devices.size() == workers)
      << "pipeline: " << options_.devices.size() << " device(s) for " << stages
      << " stage(s) x " << replicas_ << " replica(s): expected " << workers
      << ", replica-major (devices[r * stages + s] runs stage s of replica r)";
  for (int r = 0; r < replicas_; ++r) {
    for (int s = 0; s < stages; ++s) {
      const Device d = device(r, s);
      if (!d.is_cuda()) continue;
      const int visible = CudaDeviceCount();
      TANDEM_CHECK(d.index >= 0 && d.index < visible)
          << "pipeline: stage " << s << " of replica " << r << " is on " << d
          << " but " << visible << " CUDA device(s) are visible"
          << (visible == 0 ? " (" + CudaUnavailableReason() + ")" : "");
    }
  }
}

void Pipeline::SetBoundaries() {
  const int stages = options_.stages;
  Sequential& reference = *models_[0];
  const size_t layers = reference.size();
  std::vector<size_t> boundaries = options_.boundaries;
  if (boundaries.empty() && stages > 1) {
    boundaries = BalanceStages(reference, stages);
  } else {
    TANDEM_CHECK(layers >= static_cast<size_t>(stages))
        << "pipeline: model '" << reference.Name() << "' has " << layers
        << " layer(s), too few for " << stages
        << " stages (each stage needs at least one layer)";
  }
  TANDEM_CHECK(boundaries.size() == static_cast<size_t>(stages - 1))
      << "pipeline: " << boundaries.size() << " boundaries for " << stages
      << " stages: expected " << stages - 1
      << " (the layer index at which each stage after the first begins)";
  bounds_.push_back(0);
  for (size_t b : boundaries) {
    TANDEM_CHECK(b > bounds_.back() && b < layers)
        << "pipeline: stage boundary " << b << " must be greater than "
        << bounds_.back() << " and less than the model's " << layers
        << " layers: boundaries are increasing layer indices";
    bounds_.push_back(b);
  }
  bounds_.push_back(layers);
}

void Pipeline::MakeWorkers() {
  const int stages = options_.stages;
  const int micro = options_.micro_batches;
  for (int r = 0; r < replicas_; ++r) {
    for (int s = 0; s < stages; ++s) {
      auto w = std::make_unique<StageWorker>(r, s, stages, device(r, s), *models_[r],
                                             bounds_[s], bounds_[s + 1]);
      w->comms = groups_->comms(s, r);
      workers_.push_back(std::move(w));
    }
    for (int s = 0; s + 1 < stages; ++s) {
      const std::string where = "pipeline replica " + std::to_string(r) + ": stage " +
                                std::to_string(s) + " -> " + std::to_string(s + 1);
      const Device a = device(r, s), b = device(r, s + 1);
      links_.push_back(std::make_unique<HandoffLink>(where + " activations", a, b, micro,
                                                     options_.handoff_timeout));
      worker(r, s).fwd_out = worker(r, s + 1).fwd_in = links_.back().get();
      links_.push_back(std::make_unique<HandoffLink>(where + " gradients", b, a, micro,
                                                     options_.handoff_timeout));
      worker(r, s + 1).bwd_out = worker(r, s).bwd_in = links_.back().get();
    }
  }
}

void Pipeline::StartWorkers() {
  try {
    for (auto& w : workers_) {
      StageWorker* worker = w.get();
      threads_.emplace_back([this, worker] { WorkerLoop(*worker); });
    }
  } catch (...) {
    Stop();  // joins the threads already started
    throw;
  }
  RunPhase(Phase::kSetup);
  const std::string message = FailureMessage();
  if (!message.empty()) {
    Stop();
    throw Error(message);
  }
}

Pipeline::~Pipeline() { Stop(); }

void Pipeline::Stop() noexcept {
  bool detach = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    // Abandoned stages (Note [Abort]) that have come back since are joined;
    // the others may never return.
    if (abandoned_ > 0) {
      detach = !cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return running_ == 0; });
    }
  }
  cv_.notify_all();
  for (std::thread& thread : threads_) {
    if (!thread.joinable()) continue;
    if (detach) {
      thread.detach();
    } else {
      thread.join();
    }
  }
}

StageWorker& Pipeline::worker(int replica, int stage) {
  return *workers_[static_cast<size_t>(replica) * options_.stages + stage];
}

Device Pipeline::device(int replica, int stage) const {
  return options_.devices.at(static_cast<size_t>(replica) * options_.stages + stage);
}

int64_t Pipeline::stage_parameter_count(int stage) {
  int64_t n = 0;
  for (size_t i = stage_first_layer(stage); i < stage_end_layer(stage); ++i) {
    n += ParameterCount(models_[0]->layer(i));
  }
  return n;
}

std::vector<NamedParameter> Pipeline::Parameters(int replica) {
  return models_.at(replica)->Parameters();
}

// Each worker's thread: wait for a new generation (or stop), run the phase
// it names, record any failure, count itself done. RunPhase bumps the
// generation and waits until every worker is done, so phases never overlap
// and the pipeline's own thread touches the workers only between them.
void Pipeline::WorkerLoop(StageWorker& w) {
  uint64_t seen = 0;
  for (;;) {
    Phase phase;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      phase = phase_;
    }
    bool consequence = false;
    const std::string error = RunWorkerPhase(w, phase, &consequence);
    if (!error.empty()) RecordFailure(w, error, consequence);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--running_ == 0) cv_.notify_all();
    }
  }
}

std::string Pipeline::RunWorkerPhase(StageWorker& w, Phase phase, bool* consequence) {
  *consequence = false;
  try {
    BindThreadToDevice(w.device);
    if (phase == Phase::kSetup) {
      w.Setup(options_);
    } else {
      w.RunStep(options_.micro_batches, global_batch_);
    }
    return "";
  } catch (const StageAbortedError& e) {
    *consequence = true;
    return e.what();
  } catch (const CollectiveAbortedError& e) {
    *consequence = true;
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

void Pipeline::RecordFailure(StageWorker& w, const std::string& error, bool consequence) {
  const std::string message = "pipeline " + w.Label() + " failed: " + error;
  {
    // Recorded before the abort: see Note [Abort].
    std::lock_guard<std::mutex> lock(mu_);
    std::string& slot = consequence ? consequence_ : failure_;
    if (slot.empty()) slot = message;
    if (!consequence && failed_at_ == std::chrono::steady_clock::time_point()) {
      failed_at_ = std::chrono::steady_clock::now();
    }
  }
  if (!consequence) AbortAll(message);
}

void Pipeline::RunPhase(Phase phase) {
  std::unique_lock<std::mutex> lock(mu_);
  phase_ = phase;
  running_ = static_cast<int>(workers_.size());
  ++generation_;
  cv_.notify_all();
  // See Note [Abort]: after a failure, stages still running once
  // handoff_timeout has passed are abandoned.
  const auto poll = std::chrono::milliseconds(50);
  while (!cv_.wait_for(lock, poll, [&] { return running_ == 0; })) {
    if (!failure_.empty() &&
        std::chrono::steady_clock::now() - failed_at_ > options_.handoff_timeout) {
      abandoned_ = running_;
      return;
    }
  }
}

void Pipeline::AbortAll(const std::string& reason) {
  for (auto& link : links_) link->Abort(reason);
  groups_->Abort(reason);
}

void Pipeline::ReleaseHandoffs() {
  for (auto& link : links_) link->Release();
}

std::string Pipeline::FailureMessage() const {
  std::string message = failure_.empty() ? consequence_ : failure_;
  if (abandoned_ > 0) {
    message += "; " + std::to_string(abandoned_) +
               " stage thread(s) did not stop within PipelineOptions::handoff_timeout of the "
               "failure and were abandoned, still running (end the process)";
  }
  return message;
}

void Pipeline::SplitBatch(const Tensor& x, const Tensor& targets) {
  const int64_t batch = x.dim(0);
  const int micro = options_.micro_batches;
  for (int r = 0; r < replicas_; ++r) {
    const ShardRange shard = Shard(batch, r, replicas_);
    TANDEM_CHECK(shard.size() >= micro)
        << "pipeline: a batch of " << batch << " example(s) gives replica " << r
        << " " << shard.size() << ", fewer than micro_batches=" << micro
        << ": every micro-batch needs at least one example";
    StageWorker& first = worker(r, 0);
    StageWorker& last = worker(r, options_.stages - 1);
    first.inputs.assign(micro, Tensor());
    last.targets.assign(micro, Tensor());
    for (int m = 0; m < micro; ++m) {
      const ShardRange part = Shard(shard.size(), m, micro);
      first.inputs[m] = x.Slice(shard.begin + part.begin, shard.begin + part.end);
      last.targets[m] = targets.Slice(shard.begin + part.begin, shard.begin + part.end);
    }
  }
}

void Pipeline::Step(const Tensor& x, const Tensor& targets) {
  TANDEM_CHECK(!broken_) << "pipeline: an earlier step failed (" << FailureMessage()
                         << "); build a new Pipeline";
  TANDEM_CHECK(x.defined() && targets.defined()) << "pipeline: Step needs x and targets";
  TANDEM_CHECK(x.rank() >= 1 && targets.rank() >= 1 && x.dim(0) == targets.dim(0))
      << "pipeline: x " << ShapeToString(x.shape()) << " and targets "
      << ShapeToString(targets.shape())
      << " must have the same batch size (dimension 0)";
  SplitBatch(x, targets);
  global_batch_ = x.dim(0);
  RunPhase(Phase::kStep);
  ReleaseHandoffs();
  const std::string message = FailureMessage();
  if (!message.empty()) {
    broken_ = true;
    throw Error(message);
  }
  ++steps_;
}

float Pipeline::LastLoss() {
  TANDEM_CHECK(steps_ > 0) << "pipeline: LastLoss before the first Step";
  float total = 0.f;
  for (int r = 0; r < replicas_; ++r) total += worker(r, options_.stages - 1).loss_total.Item();
  return total;
}

std::vector<double> Pipeline::LastBusySeconds(int replica) {
  TANDEM_CHECK(options_.record_timing)
      << "pipeline: LastBusySeconds needs PipelineOptions::record_timing";
  TANDEM_CHECK(steps_ > 0) << "pipeline: LastBusySeconds before the first Step";
  TANDEM_CHECK(replica >= 0 && replica < replicas_)
      << "pipeline: LastBusySeconds of replica " << replica << ", but there are "
      << replicas_ << " (0 to " << replicas_ - 1 << ")";
  std::vector<double> seconds;
  for (int s = 0; s < options_.stages; ++s) {
    seconds.push_back(worker(replica, s).timer.BusySeconds());
  }
  return seconds;
}

}  // namespace tandem
