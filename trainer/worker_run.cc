#include "trainer/worker_run.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <iomanip>
#include <limits>
#include <sstream>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/profile_range.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "parallel/checkpointer.h"
#include "parallel/comm_hook.h"
#include "parallel/sharding.h"
#include "trainer/config_check.h"
#include "trainer/stop_signal.h"

namespace tandem {
namespace trainer_internal {

namespace {

double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Trace rows of a worker beside StepTracer's compute (0) and communication (1).
constexpr int kDataRow = 2;
constexpr int kInputWaitRow = 3;

}  // namespace

WorkerRun::WorkerRun(const TrainTask& task, const TrainConfig& config, Worker& worker,
                     std::ostream& log, ChromeTrace* trace, SharedResult& shared)
    : task_(task), config_(config), worker_(worker), log_(log), trace_(trace),
      shared_(shared), root_(worker.is_root()), live_progress_(IsInteractive(log)),
      objective_(ObjectiveOf(task)), loss_(objective_.NewLoss()),
      test_loss_(objective_.NewLoss()), schedule_(ParseLrSchedule(config.lr_schedule)) {
  const int64_t train_size = task.train->size();
  run_key_ = RunKey(config, train_size);
  steps_per_epoch_ = (train_size + config.batch_size - 1) / config.batch_size;
  total_steps_ = config.steps > 0 ? config.steps : steps_per_epoch_ * config.epochs;
  const Device device = worker.device;
  loss_sum_ = Tensor::Zeros({1}, device);
  correct_sum_ = Tensor::Zeros({1}, device);
  correct_ = Tensor::Empty({1}, device);
  step_loss_ = Tensor::Empty({1}, device);
  first_bad_ = Tensor::Full({1}, -1.f, device);
  BuildModel();
  BuildTracing();
}

namespace {

// The checks of --deterministic that need the worker: the world size under
// mpirun, and the device "auto" chose.
void CheckDeterministicWorker(const TrainConfig& config, const Worker& worker) {
  if (!config.deterministic) return;
  if (!IsPowerOfTwo(worker.size) || worker.size > config.micro_shards) {
    throw UsageError("--deterministic needs a power-of-two number of workers no larger than "
                     "--micro_shards=" + std::to_string(config.micro_shards) + ", not " +
                     std::to_string(worker.size));
  }
  if (worker.device.is_cuda()) {
    throw UsageError("--deterministic runs on the CPU only, but --device=" +
                     config.launch.device + " chose " + worker.device.ToString() +
                     ": use --device=cpu");
  }
}

// --deterministic: the hook that sums the gradients in a fixed tree, and
// `*kept` where the training loop hands it each piece's gradients.
std::unique_ptr<CommHook> DeterministicReduce(const TrainConfig& config,
                                              DeterministicSumHook** kept) {
  if (!config.deterministic) return nullptr;
  auto hook = std::make_unique<DeterministicSumHook>();
  *kept = hook.get();
  return hook;
}

}  // namespace

void WorkerRun::BuildModel() {
  CheckDeterministicWorker(config_, worker_);
  model_ = task_.build_model(
      ModelContext{worker_.device, config_.precision, config_.seed, worker_.rank});
  TANDEM_CHECK(model_ != nullptr) << task_.name << ": build_model returned no model";
  ReducerOptions options;
  options.bucket_bytes = static_cast<int64_t>(config_.bucket_mb * (1 << 20));
  options.overlap = config_.overlap;
  options.shard_optimizer = config_.shard_optimizer;
  reducer_ = std::make_unique<Reducer>(*model_, worker_.gradient_comms(), options);
  optimizer_ = MakeOptimizer(config_.optimizer, model_->Parameters());
  if (config_.shard_optimizer) {
    // Registered before any Resume: the hook shards the optimizer's state,
    // which it refuses once steps are counted. It clips too (by the norm
    // over every worker's shards) and counts the steps: no clipper_, no
    // optimizer->Step().
    ShardedOptimizerOptions so;
    so.max_grad_norm = config_.clip_grad_norm;
    so.track_grad_norm = config_.log_every > 0;
    // The forward runs through the reducer (ForwardMicro), evaluations
    // after WaitForParameters.
    so.gather_during_forward = true;
    auto hook = std::make_unique<ShardedOptimizerHook>(*optimizer_, so,
                                                       DeterministicReduce(config_, &tree_sum_));
    sharded_ = hook.get();
    reducer_->RegisterCommHook(std::move(hook));
  } else {
    BuildUnshardedStep();
  }
  if (config_.log_every > 0) {
    // After the reducer: the gradients it laid out in buckets.
    step_log_.emplace(config_.log_every, worker_.comm, model_->Parameters(), worker_.device);
  }
}

void WorkerRun::BuildUnshardedStep() {
  std::unique_ptr<CommHook> reduce = DeterministicReduce(config_, &tree_sum_);
  if (config_.bf16_allreduce) reduce = std::make_unique<BFloat16CompressionHook>();
  if (config_.clip_grad_norm > 0) {
    // Clipping needs the whole gradient's norm: the optimizer steps after
    // backward (see train_config.h).
    if (reduce) reducer_->RegisterCommHook(std::move(reduce));
    clipper_.emplace(model_->Parameters(), config_.clip_grad_norm, worker_.device);
  } else {
    // Each bucket is updated as soon as it is reduced (on GPUs beside
    // backward), and the hook counts the step: no optimizer->Step().
    reducer_->RegisterCommHook(
        std::make_unique<OptimizerUpdateHook>(*optimizer_, std::move(reduce)));
  }
}

void WorkerRun::BuildTracing() {
  if (trace_ == nullptr) return;
  tracer_.emplace(*trace_, worker_.rank, worker_.device, *reducer_,
                  PrecisionName(config_.precision));
  trace_->SetThreadName(worker_.rank, kDataRow, "data (next batch)");
  trace_->SetThreadName(worker_.rank, kInputWaitRow, "waiting for data");
}

// Every rank reads the file itself; Restore checks everything before
// changing anything. See Note [Resuming with another worker count] in
// parallel/checkpointer.cc.
bool WorkerRun::Resume() {
  std::optional<CheckpointState> state = LoadLatestCheckpoint(config_.checkpoint_dir);
  const bool talk = root_ && !config_.quiet;
  if (!state) {
    if (talk) log_ << "no checkpoint in " << config_.checkpoint_dir << ": starting afresh\n";
    return false;
  }
  CheckRunKey(*state, run_key_, config_);
  CheckpointState model_state = *state;
  model_state.extra_u64.erase(kRunKey);
  if (sharded_) {
    // The file holds the whole state under the unsharded names, whatever
    // saved it: checked with everything else, then each worker takes its
    // blocks (not a collective).
    sharded_->LoadState(
        Restore(model_state, *model_, *optimizer_, UnshardedStateShapes(*optimizer_)));
  } else {
    Restore(model_state, *model_, *optimizer_);
  }
  start_epoch_ = static_cast<int>(state->epoch);
  start_batch_ = state->batch_in_epoch;
  // Saved after an epoch's last step: this run starts the next epoch.
  if (start_batch_ >= steps_per_epoch_) {
    ++start_epoch_;
    start_batch_ = 0;
  }
  last_eval_step_ = optimizer_->steps();
  if (talk) {
    log_ << "resumed from " << CheckpointPath(config_.checkpoint_dir) << " at step "
         << optimizer_->steps() << " (epoch " << start_epoch_ + 1 << ", batch "
         << start_batch_ << ")\n";
  }
  return true;
}

void WorkerRun::LogSetup() const {
  if (!root_ || config_.quiet) return;
  if (!task_.about_data.empty()) log_ << task_.about_data << "\n";
  log_ << "model: " << model_->Describe() << " (" << ParameterCount(*model_)
       << " parameters), " << reducer_->num_buckets() << " gradient bucket(s)\n"
       << "data: " << task_.train->size() << " train / " << task_.test->size() << " "
       << task_.test_name << " examples; " << worker_.size << " worker(s), mode "
       << ToString(config_.launch.mode) << ", device " << worker_.device << ", precision "
       << PrecisionPolicy{config_.precision}.Describe(GetBackend(worker_.device))
       << (config_.bf16_allreduce ? ", gradients all-reduced in bf16" : "") << "\n";
  if (config_.steps > 0) {
    log_ << "training " << config_.steps << " steps of " << config_.batch_size << " examples\n";
  }
  if (config_.accumulate > 1) {
    log_ << "each batch in " << config_.accumulate
         << " micro-batches per worker, gradients accumulated (--accumulate)\n";
  }
  if (config_.clip_grad_norm > 0) {
    log_ << "gradients clipped to norm " << config_.clip_grad_norm
         << " (--clip_grad_norm): the optimizer updates after the whole gradient is reduced, "
            "not bucket by bucket beside backward\n";
  }
  if (config_.deterministic) {
    log_ << "deterministic (--deterministic): each batch in " << config_.micro_shards
         << " pieces (--micro_shards), " << config_.micro_shards / worker_.size
         << " per worker, gradients summed in one fixed order, "
         << (config_.launch.cpu_threads == 0 ? 1 : config_.launch.cpu_threads)
         << " intra-op thread(s) per worker (--cpu_threads)\n";
  }
  if (sharded_) {
    log_ << "optimizer state sharded over " << worker_.size << " worker(s) (--shard_optimizer): "
         << optimizer_->state_bytes() << " bytes each\n";
  }
}

std::string WorkerRun::Title() const {
  std::string title =
      task_.name + ", " + (task_.model_name.empty() ? model_->Name() : task_.model_name);
  if (config_.precision != Precision::kFp32) {
    title += " " + std::string(PrecisionName(config_.precision));
  }
  return title + ", " + std::to_string(worker_.size) +
         (worker_.size == 1 ? " worker" : " workers");
}

void WorkerRun::Save(int64_t epoch, int64_t batch_in_epoch) {
  // Sharded: the whole optimizer state, gathered from every worker's shards
  // (a collective) under the unsharded names, so the file is the one an
  // unsharded run writes.
  std::vector<std::pair<std::string, Tensor>> whole;
  if (sharded_) {
    sharded_->GatherMasters();
    whole = sharded_->GatherState();
  }
  CheckpointState state;
  if (root_) {
    TrainingProgress progress;
    progress.epoch = epoch;
    progress.batch_in_epoch = batch_in_epoch;
    progress.seed = config_.seed;
    state = sharded_ ? Capture(*model_, *optimizer_, whole, progress)
                     : Capture(*model_, *optimizer_, progress);
    state.extra_u64[kRunKey] = run_key_;
  }
  // Collective: every rank calls it at the same step; rank 0 writes.
  SaveCheckpoint(worker_.comm, config_.checkpoint_dir, state);
}

void WorkerRun::CheckFinite(int epoch) {
  const float bad = first_bad_.Item();
  TANDEM_CHECK(bad < 0.f)
      << "the loss is not finite (NaN or Inf) at step " << static_cast<int64_t>(bad)
      << " (epoch " << epoch + 1 << ", rank " << worker_.rank
      << "): training stopped; lower --lr, or pass --skip_nonfinite to skip such steps";
}

// With --skip_nonfinite every rank must skip the same steps, or their
// collectives would no longer pair up: they agree through the host
// communicator. Otherwise the device keeps a sticky record, read now and then.
bool WorkerRun::SkipNonFinite(const Tensor& step_loss, int epoch) {
  if (config_.skip_nonfinite) {
    float bad = std::isfinite(step_loss.Item()) ? 0.f : 1.f;
    worker_.comm.AllReduce(&bad, 1, ReduceOp::kSum)->Wait();
    return bad > 0.f;
  }
  ops::TrackNonFinite(step_loss, global_step_, first_bad_);
  if (global_step_ % kCheckEvery == 0) CheckFinite(epoch);
  return false;
}

data::BatchIterator WorkerRun::Batches(int epoch) const {
  data::BatchIterator batches(
      data::EpochOrder(task_.train->size(), config_.seed, epoch, /*shuffle=*/true),
      config_.batch_size);
  if (epoch == start_epoch_) batches.Seek(start_batch_);
  return batches;
}

data::PrefetchOptions WorkerRun::PrefetchFor(int epoch) {
  data::PrefetchOptions options;
  options.background = config_.prefetch;
  const int rank = worker_.rank, size = worker_.size;
  if (config_.deterministic) {
    const int pieces = config_.micro_shards;
    options.shard = [rank, size, pieces](const std::vector<int64_t>& batch) {
      return MicroShardBlockIndices(batch, pieces, rank, size);
    };
    options.max_rows = MicroShardBlock(config_.batch_size, pieces, 0, size).size();
  } else {
    options.shard = [rank, size](const std::vector<int64_t>& batch) {
      return ShardIndices(batch, rank, size);
    };
    options.max_rows = Shard(config_.batch_size, 0, size).size();
  }
  if (tracer_) {
    // The batches of the traced steps: this run's steps 1..trace_steps,
    // counted from 0 (as global_step_ before the step).
    const int64_t first = static_cast<int64_t>(epoch - start_epoch_) * steps_per_epoch_ -
                          start_batch_;
    options.on_prepared = [this, epoch, first](int64_t index, Clock::time_point begin,
                                                Clock::time_point end) {
      const int64_t step = first + index;
      if (step < 1 || step > config_.trace_steps) return;
      trace_->AddComplete("prepare batch " + std::to_string(index), "data", worker_.rank,
                          kDataRow, begin, end, {{"epoch", epoch + 1}});
    };
  }
  return options;
}

Tensor WorkerRun::ForwardMicro(const data::Batch& batch, int64_t begin, int64_t end,
                               bool traced) {
  Tensor x = batch.features.Slice(begin, end), y = batch.labels.Slice(begin, end);
  Tensor out = traced ? reducer_->ForwardWith(x, tracer_->forward_args()) : reducer_->Forward(x);
  Tensor micro_loss;
  {
    ProfileRange loss_range("loss");
    // Normalised by the global batch: see Note [Gradient averaging].
    micro_loss = loss_->Forward(out, y, batch.global_size);
  }
  if (objective_.HasAccuracy()) objective_.CountCorrect(out, y, correct_, correct_sum_);
  return micro_loss;
}

std::vector<ShardRange> WorkerRun::MicroBatches(int64_t global_rows, int64_t rows) const {
  std::vector<ShardRange> micro;
  if (config_.deterministic) {
    // This worker's pieces of the batch, empty ones too: every piece is a
    // leaf of the sum's tree.
    return MicroShardPieces(global_rows, config_.micro_shards, worker_.rank, worker_.size);
  }
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(config_.accumulate, rows));
  for (int64_t m = 0; m < count; ++m) micro.push_back({rows * m / count, rows * (m + 1) / count});
  return micro;
}

// Micro-batches (--accumulate) split the worker's rows in order; the first
// writes the gradients (GradMode::kOverwrite: no ZeroGrad pass), the others
// add to them; all but the last only accumulate locally
// (GradientSync::kAccumulateLocally), the last reduces them and updates.
// See Note [Gradient averaging] in parallel/reducer.cc: every micro-batch's
// loss is divided by the global batch, so the accumulated gradient is the
// global batch's mean.
// With --deterministic every piece writes its own gradients and all but the
// last hand them to the tree sum (DeterministicSumHook::KeepLeaf).
bool WorkerRun::Step(const data::Batch& batch, int epoch) {
  ProfileRange range([&] { return "step " + std::to_string(optimizer_->steps() + 1); });
  optimizer_->set_lr(WarmedUpLr(schedule_, config_.optimizer.lr, optimizer_->steps(),
                                total_steps_, config_.warmup_steps));
  const std::vector<ShardRange> pieces = MicroBatches(batch.global_size, batch.features.dim(0));
  const int64_t micro = static_cast<int64_t>(pieces.size());
  const bool traced = tracer_ && global_step_ >= 1 && global_step_ < 1 + config_.trace_steps;
  // This worker's share of the global batch's loss: the one micro-batch's,
  // or the micro-batches' sum.
  Tensor step_loss;
  for (int64_t m = 0; m < micro; ++m) {
    const bool last = m == micro - 1;
    if (traced && last) tracer_->Begin();
    Tensor micro_loss = ForwardMicro(batch, pieces[m].begin, pieces[m].end, traced && last);
    if (micro == 1) {
      step_loss = micro_loss;
    } else {
      if (m == 0) ops::Fill(step_loss_, 0.f);
      ops::Axpy(1.f, micro_loss, step_loss_);
      step_loss = step_loss_;
    }
    if (traced && last) tracer_->LossDone();
    if (!last) {
      BackwardMicro(m == 0 || tree_sum_ != nullptr, GradientSync::kAccumulateLocally);
      if (tree_sum_) tree_sum_->KeepLeaf(BackwardArgs::For(worker_.device).lane);
    }
  }
  ++global_step_;
  if (SkipNonFinite(step_loss, epoch)) {
    if (tree_sum_) tree_sum_->DropLeaves();  // this step's pieces are not summed
    return false;
  }
  ops::Axpy(1.f, step_loss, loss_sum_);
  // Reduces (and updates: see BuildModel).
  BackwardMicro(micro == 1 || tree_sum_ != nullptr, GradientSync::kReduce,
                traced ? tracer_->hooks() : nullptr);
  if (clipper_) {  // unsharded: the hook of a sharded step clips and steps
    clipper_->Clip();
    optimizer_->Step();
  }
  if (traced) {
    tracer_->BackwardDone();
    tracer_->End();
  }
  FinishStep(step_loss, epoch, batch.global_size);
  return true;
}

void WorkerRun::BackwardMicro(bool first, GradientSync sync, const LayerHooks* hooks) {
  BackwardArgs args = BackwardArgs::For(worker_.device);
  args.hooks = hooks;
  args.input_grad = false;
  args.grad_mode = first ? GradMode::kOverwrite : GradMode::kAccumulate;
  // A traced step's reductions carry timing events (the trace's rows).
  reducer_->BackwardWith(loss_->Backward(), args, sync,
                         hooks != nullptr ? CollectiveTiming::kTimed : CollectiveTiming::kUntimed);
}

void WorkerRun::FinishStep(const Tensor& step_loss, int epoch, int64_t examples) {
  totals_.comm_wait += reducer_->last_comm_wait_seconds();
  if (!step_log_) return;
  std::optional<StepRow> row =
      step_log_->After(optimizer_->steps(), epoch, examples, step_loss, optimizer_->lr());
  // Sharded, a gradient holds the reduced sum only in this worker's block:
  // the hook's norm is over every worker's blocks.
  if (row && sharded_) row->grad_norm = sharded_->last_grad_norm().Item();
  if (row && root_) report_->Step(*row);
}

bool WorkerRun::RunFinished() const {
  return config_.steps > 0 && optimizer_->steps() >= config_.steps;
}

WorkerRun::EpochEnd WorkerRun::TrainEpoch(int epoch) {
  data::BatchIterator order = Batches(epoch);
  const int64_t num_batches = order.num_batches();
  data::BatchPrefetcher batches(*task_.train, std::move(order), worker_.device,
                                PrefetchFor(epoch));
  std::optional<ProgressBar> bar;
  running_loss_ = NAN;  // none read yet this epoch
  if (root_ && !config_.quiet && config_.steps == 0) {
    // Into a file, a pipe or mpirun's merged output: one line per epoch.
    ProgressOptions options;
    options.plain_interval_seconds = std::numeric_limits<double>::infinity();
    bar.emplace(log_, "epoch " + std::to_string(epoch + 1) + "/" +
                          std::to_string(config_.epochs),
                num_batches, live_progress_, options);
  }
  bool stop = false, saved = false;
  data::Batch batch;
  while (!stop && !RunFinished()) {
    const Clock::time_point wait_start = Clock::now();
    if (!batches.Next(batch)) break;
    if (tracer_ && global_step_ >= 1 && global_step_ < 1 + config_.trace_steps) {
      trace_->AddComplete("next batch", "data", worker_.rank, kInputWaitRow, wait_start,
                          Clock::now());
    }
    ++totals_.steps;
    totals_.examples += batch.global_size;
    saved = false;
    if (Step(batch, epoch)) {
      if (config_.checkpoint_every > 0 && optimizer_->steps() % config_.checkpoint_every == 0) {
        Save(epoch, batch.index + 1);
        saved = true;
      }
      if (bar && live_progress_) ShowProgress(*bar, batch.index + 1, num_batches);
      if (config_.eval_every > 0 && optimizer_->steps() % config_.eval_every == 0) {
        std::optional<ProgressBar> none;
        EvaluateAndReport(epoch, none);
      }
    } else {
      ++totals_.skipped;
    }
    stop = StopAfterStep();
  }
  const bool finished = RunFinished();
  // Where the run stopped, so that --resume continues from there.
  if ((stop || finished) && !saved && !config_.checkpoint_dir.empty()) {
    Save(epoch, batch.index + 1);
  }
  if (!config_.skip_nonfinite) CheckFinite(epoch);
  if (stop_signal_ != 0) return EpochEnd::kStopped;  // no evaluation: asked to end
  if (config_.steps == 0 || finished) EvaluateAndReport(epoch, bar);
  if (stop) return EpochEnd::kStopped;
  return finished ? EpochEnd::kFinished : EpochEnd::kNext;
}

bool WorkerRun::StopAfterStep() {
  const bool at_max = config_.max_steps > 0 && optimizer_->steps() >= config_.max_steps;
  if (!AgreeToStop(worker_.comm, StopSignals::received() != 0)) return at_max;
  stop_signal_ = StopSignals::received();
  if (stop_signal_ == 0) stop_signal_ = SIGTERM;  // another MPI rank's signal
  if (root_) {
    log_ << (live_progress_ ? "\n" : "") << "stopping after step " << optimizer_->steps() << ": "
         << StopSignals::Name(stop_signal_) << " received"
         << (config_.checkpoint_dir.empty() ? "" : "; saving a checkpoint in " +
                                                       config_.checkpoint_dir)
         << std::endl;
  }
  return true;
}

// Reading the loss waits for the device, so it is read only now and then:
// at the first step shown (a line never shows a loss it has not read), every
// 20 steps, and at the last. The local sum times the worker count estimates
// the global mean.
void WorkerRun::ShowProgress(ProgressBar& bar, int64_t done, int64_t num_batches) {
  if (std::isnan(running_loss_) || done % 20 == 0 || done == num_batches) {
    running_loss_ = loss_sum_.Item() * worker_.size /
                    std::max<int64_t>(1, totals_.steps - totals_.skipped);
  }
  bar.Update(done, std::min<int64_t>(done * config_.batch_size, task_.train->size()),
             running_loss_);
}

void WorkerRun::EvaluateAndReport(int epoch, std::optional<ProgressBar>& bar) {
  if (optimizer_->steps() == last_eval_step_) return;  // evaluated at this step already
  Report(Measure(epoch), bar);
  last_eval_step_ = optimizer_->steps();
  evaluated_ = true;
  ops::Fill(loss_sum_, 0.f);
  ops::Fill(correct_sum_, 0.f);
  totals_ = Totals();
  if (step_log_) step_log_->StartInterval();  // not the evaluation
}

EvalStats WorkerRun::Measure(int epoch) {
  // [loss, correct]: sums over ranks give the global figures.
  float sums[2] = {loss_sum_.Item(), correct_sum_.Item()};
  const double seconds = SecondsSince(totals_.start);
  worker_.comm.AllReduce(sums, 2, ReduceOp::kSum)->Wait();
  const int64_t counted = totals_.steps - totals_.skipped;
  EvalStats stats;
  stats.epoch = epoch + 1;
  stats.step = optimizer_->steps();
  stats.loss = counted > 0 ? sums[0] / counted : NAN;
  // Over the examples (or tokens) trained since the last evaluation.
  const double predictions = static_cast<double>(totals_.examples) *
                             objective_.PredictionsPerExample(*task_.train);
  stats.train_accuracy =
      objective_.HasAccuracy() ? sums[1] / std::max<double>(1.0, predictions) : NAN;
  const TestFigures test = Evaluate();
  stats.test_loss = test.loss;
  stats.test_accuracy = test.accuracy;
  stats.samples_per_second = seconds > 0 ? totals_.examples / seconds : 0.0;
  stats.comm_wait_seconds = totals_.comm_wait;
  stats.skipped_steps = totals_.skipped;
  stats.seconds = SecondsSince(start_);
  stats.optimizer_state_bytes = optimizer_->state_bytes();
  TANDEM_CHECK(config_.skip_nonfinite || counted == 0 ||
               (std::isfinite(stats.loss) && std::isfinite(stats.test_loss)))
      << "the loss is not finite at step " << stats.step << ": lower --lr";
  return stats;
}

void WorkerRun::Report(const EvalStats& stats, std::optional<ProgressBar>& bar) {
  if (!root_) return;
  const std::string name = task_.test_name;
  std::ostringstream summary;
  summary << std::fixed << "loss " << std::setprecision(4) << stats.loss;
  if (objective_.HasAccuracy()) summary << "  train_acc " << stats.train_accuracy;
  summary << "  " << name << "_loss " << stats.test_loss;
  if (objective_.HasAccuracy()) summary << "  " << name << "_acc " << stats.test_accuracy;
  summary << "  samples/s " << std::setprecision(0)
          << stats.samples_per_second << "  comm_wait " << std::setprecision(3)
          << stats.comm_wait_seconds << "s";
  if (stats.skipped_steps > 0) {
    summary << "  skipped " << stats.skipped_steps << " non-finite step(s)";
  }
  if (bar) {
    bar->Finish(summary.str());
  } else if (!config_.quiet) {
    log_ << "step " << std::setw(6) << stats.step << "/" << total_steps_ << "  train_"
         << summary.str() << "  (" << std::fixed << std::setprecision(1) << stats.seconds
         << " s)" << std::endl;
  }
  report_->Eval(stats, optimizer_->lr());
  std::lock_guard<std::mutex> lock(shared_.mutex);
  shared_.result.evals.push_back(stats);
}

// Accuracy and mean loss over the test set: each rank evaluates its shard
// in chunks, the sums are summed over workers.
WorkerRun::TestFigures WorkerRun::Evaluate() {
  reducer_->WaitForParameters();  // a sharded step may still be gathering them
  model_->SetTraining(false);
  const data::Dataset& test = *task_.test;
  const ShardRange shard = Shard(test.size(), worker_.rank, worker_.size);
  constexpr int64_t kChunk = 4096;
  Tensor correct = Tensor::Zeros({1}, worker_.device);
  Tensor loss = Tensor::Zeros({1}, worker_.device);
  Tensor count = Tensor::Empty({1}, worker_.device);
  Tensor host_x = Tensor::Empty({kChunk, test.feature_size()});
  Tensor host_y = Tensor::Empty(data::LabelShape(test, kChunk));
  std::vector<int64_t> indices;
  for (int64_t begin = shard.begin; begin < shard.end; begin += kChunk) {
    const int64_t end = std::min(shard.end, begin + kChunk);
    indices.resize(end - begin);
    for (int64_t i = begin; i < end; ++i) indices[i - begin] = i;
    test.Gather(indices, host_x, host_y);
    Tensor x = host_x.Slice(0, end - begin).To(worker_.device);
    Tensor y = host_y.Slice(0, end - begin).To(worker_.device);
    Tensor out = model_->Forward(x);
    if (objective_.HasAccuracy()) objective_.CountCorrect(out, y, count, correct);
    // Divided by the whole test set: the chunks' and ranks' sum is the mean.
    ops::Axpy(1.f, test_loss_->Forward(out, y, test.size()), loss);
  }
  float sums[2] = {correct.Item(), loss.Item()};
  worker_.comm.AllReduce(sums, 2, ReduceOp::kSum)->Wait();
  model_->SetTraining(true);
  const double predictions =
      static_cast<double>(test.size()) * objective_.PredictionsPerExample(test);
  return {objective_.HasAccuracy() ? sums[0] / predictions : NAN, sums[1]};
}

void WorkerRun::Finish(bool stopped) {
  // A run resumed at its end trains nothing: report the restored model's
  // test figures rather than none (collective: every worker evaluates).
  if (!evaluated_ && stop_signal_ == 0) {
    const TestFigures test = Evaluate();
    if (root_) {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.result.test_accuracy = test.accuracy;
      shared_.result.test_loss = test.loss;
    }
  }
  if (!config_.checkpoint_dir.empty() && !stopped) Save(config_.epochs, 0);
  // Every rank's masters whole again (collective): after_training, the
  // export and the result read them.
  if (sharded_) sharded_->GatherMasters();
  if (stop_signal_ == 0 && task_.after_training) task_.after_training(*model_, worker_);
  if (root_ && stop_signal_ == 0 && !config_.export_safetensors.empty()) {
    ExportSafetensors(config_.export_safetensors, *model_);
    if (!config_.quiet) log_ << "exported the parameters to " << config_.export_safetensors << "\n";
  }
  std::lock_guard<std::mutex> lock(shared_.mutex);
  shared_.result.stop_signal = stop_signal_;
  if (!root_) {
    if (config_.launch.mode == LaunchMode::kMpi) shared_.result.is_root = false;
    return;
  }
  for (NamedParameter& p : model_->Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    shared_.result.parameters.insert(shared_.result.parameters.end(), v.begin(), v.end());
  }
}

// A fresh run (no --resume) into a folder that holds a checkpoint replaces
// it at its first save: say so before training, not silently.
void WorkerRun::NoteCheckpointToReplace() const {
  if (config_.resume || config_.checkpoint_dir.empty() || !root_ || config_.quiet) return;
  const std::string path = CheckpointPath(config_.checkpoint_dir);
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return;  // nothing there
  if (::stat(path.c_str(), &info) != 0) {
    log_ << "note: " << path << " is a symbolic link to a file that does not exist; this run "
         << "replaces the link at its first save\n";
    return;
  }
  log_ << "note: " << path
       << " holds an earlier run's checkpoint; this run starts afresh and replaces it at its "
          "first save (--resume continues it instead)\n";
}

void WorkerRun::Run() {
  NoteCheckpointToReplace();
  const bool resumed = config_.resume && Resume();
  if (root_) {
    report_.emplace(config_, Title(),
                    resumed ? std::optional<int64_t>(optimizer_->steps()) : std::nullopt);
  }
  LogSetup();
  // Resumed at --max_steps or at the end of a run by steps: nothing to train.
  bool stopped = config_.max_steps > 0 && optimizer_->steps() >= config_.max_steps;
  bool finished = RunFinished();
  const int last_epoch = config_.steps > 0 ? std::numeric_limits<int>::max() : config_.epochs;
  for (int epoch = start_epoch_; epoch < last_epoch && !stopped && !finished; ++epoch) {
    const EpochEnd end = TrainEpoch(epoch);
    stopped = end == EpochEnd::kStopped;
    finished = end == EpochEnd::kFinished;
  }
  Finish(stopped || finished);
}

}  // namespace trainer_internal
}  // namespace tandem
