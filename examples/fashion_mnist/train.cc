#include "examples/fashion_mnist/train.h"

#include <chrono>
#include <csignal>
#include <cmath>
#include <exception>
#include <iomanip>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"
#include "core/profile_range.h"
#include "core/rng.h"
#include "data/batch_iterator.h"
#include "data/idx_reader.h"
#include "data/normalize.h"
#include "examples/fashion_mnist/config_check.h"
#include "examples/fashion_mnist/run_report.h"
#include "examples/fashion_mnist/step_log.h"
#include "examples/fashion_mnist/step_tracer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "layers/loss.h"
#include "layers/lr_schedule.h"
#include "layers/mlp.h"
#include "parallel/checkpointer.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"
#include "report/chrome_trace.h"
#include "report/progress.h"
#include "trainer/stop_signal.h"

namespace tandem {

std::vector<int64_t> ParseSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v <= 0) {
      throw UsageError("--hidden must be positive sizes separated by commas (e.g. 512,256), got '" +
                       text + "'");
    }
    sizes.push_back(v);
  }
  return sizes;
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The normalised training and test sets, shared by every worker.
struct Datasets {
  data::Dataset train, test;
};

Datasets LoadData(const TrainConfig& config) {
  Datasets d{data::LoadFashionMnist(config.data_dir, true, config.max_train),
             data::LoadFashionMnist(config.data_dir, false, config.max_test)};
  // Statistics of the training set only, applied to both.
  const data::Normalization norm = data::ComputeNormalization(d.train.images);
  data::Normalize(norm, d.train.images);
  data::Normalize(norm, d.test.images);
  return d;
}

// What the workers of one process report to TrainFashionMnist.
struct SharedResult {
  std::mutex mutex;
  TrainResult result;
};

// One worker's training run, step by step: built, resumed, then epochs of
// steps, each epoch closed by evaluation and reports.
class WorkerRun {
 public:
  WorkerRun(const TrainConfig& config, const Datasets& data, Worker& worker,
            std::ostream& log, ChromeTrace* trace, SharedResult& shared);
  void Run();

 private:
  // Per-epoch running sums, on the device.
  struct EpochTotals {
    int64_t steps = 0, skipped = 0, examples = 0;
    double comm_wait = 0.0;
  };
  // What Evaluate measures on the test set.
  struct TestFigures {
    double accuracy, loss;
  };
  void BuildModel();
  // Restores the checkpoint in --checkpoint_dir; false when there is none.
  bool Resume();
  void LogSetup() const;
  // "Fashion-MNIST, MLP 784-512-256-10, 2 workers": the plot's title.
  std::string Title() const;
  // Trains one epoch; false once the run must stop early (--max_steps or a
  // signal), after saving where it stopped.
  bool TrainEpoch(int epoch);
  // After each step: true when every worker agrees to stop now.
  bool StopAfterStep();
  // One step on `batch`; false when it was skipped (non-finite loss).
  bool Step(const std::vector<int64_t>& batch, int epoch, EpochTotals& totals);
  void ShowProgress(ProgressBar& bar, const data::BatchIterator& batches,
                    const EpochTotals& totals, double& running_loss);
  void LoadShard(const std::vector<int64_t>& batch, Tensor& x, Tensor& y);
  bool SkipNonFinite(const Tensor& step_loss, int epoch);
  void CheckFinite(int epoch);
  EpochStats FinishEpoch(int epoch, const EpochTotals& totals, double seconds);
  void Report(const EpochStats& stats, std::optional<ProgressBar>& bar);
  void Save(int64_t epoch, int64_t batch_in_epoch);
  TestFigures Evaluate();
  void Finish(bool stopped);

  const TrainConfig& config_;
  const Datasets& data_;
  Worker& worker_;
  std::ostream& log_;
  ChromeTrace* trace_;
  SharedResult& shared_;
  const bool root_;
  // A live progress line: on an interactive terminal of a single process.
  const bool live_progress_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<StepTracer> tracer_;
  std::optional<StepLog> step_log_;  // --log_every
  std::optional<RunReport> report_;  // rank 0's
  SoftmaxCrossEntropyLoss loss_, test_loss_;
  std::vector<uint64_t> run_key_;
  int start_epoch_ = 0;
  int64_t start_batch_ = 0;
  int64_t global_step_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int epochs_trained_ = 0;
  int stop_signal_ = 0;  // the signal that stopped the run, 0 while none
  LrSchedule schedule_;
  Tensor x_buffer_, y_buffer_, loss_sum_, correct_sum_, correct_;
  // The first step whose loss was not finite, -1 while none: see
  // ops::TrackNonFinite. Read every kCheckEvery steps, not every step.
  Tensor first_bad_;
  static constexpr int64_t kCheckEvery = 50;
};

WorkerRun::WorkerRun(const TrainConfig& config, const Datasets& data, Worker& worker,
                     std::ostream& log, ChromeTrace* trace, SharedResult& shared)
    : config_(config), data_(data), worker_(worker), log_(log), trace_(trace),
      shared_(shared), root_(worker.is_root()), live_progress_(IsInteractive(log)),
      schedule_(ParseLrSchedule(config.lr_schedule)) {
  run_key_ = RunKey(config, data.train.size());
  steps_per_epoch_ = (data.train.size() + config.batch_size - 1) / config.batch_size;
  total_steps_ = steps_per_epoch_ * config.epochs;
  const Device device = worker.device;
  const int64_t max_shard = Shard(config.batch_size, 0, worker.size).size();
  x_buffer_ = Tensor::Empty({max_shard, data.train.images.dim(1)}, device);
  y_buffer_ = Tensor::Empty({max_shard}, device);
  loss_sum_ = Tensor::Empty({1}, device);
  correct_sum_ = Tensor::Empty({1}, device);
  correct_ = Tensor::Empty({1}, device);
  first_bad_ = Tensor::Full({1}, -1.f, device);
  BuildModel();
}

void WorkerRun::BuildModel() {
  std::vector<int64_t> sizes = {data_.train.images.dim(1)};
  for (int64_t h : config_.hidden) sizes.push_back(h);
  sizes.push_back(data_.train.num_classes);
  Rng rng(config_.seed);
  MlpOptions mlp;
  mlp.dropout = config_.dropout;
  mlp.dropout_seed = config_.seed + 1 + 1000 * worker_.rank;
  mlp.device = worker_.device;
  mlp.precision = config_.precision;
  model_ = Mlp(sizes, ParseActivation(config_.activation), rng, mlp);
  ReducerOptions options;
  options.bucket_bytes = static_cast<int64_t>(config_.bucket_mb * (1 << 20));
  options.overlap = config_.overlap;
  reducer_ = std::make_unique<Reducer>(*model_, worker_.gradient_lanes(), options);
  optimizer_ = MakeOptimizer(config_.optimizer, model_->Parameters());
  // Each bucket is updated as soon as it is reduced (on GPUs beside
  // backward), and the hook counts the step: no optimizer->Step() below.
  std::unique_ptr<CommHook> reduce;
  if (config_.bf16_allreduce) reduce = std::make_unique<BFloat16CompressionHook>();
  reducer_->RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer_, std::move(reduce)));
  if (config_.log_every > 0) {
    // After the reducer: the gradients it laid out in buckets.
    step_log_.emplace(config_.log_every, worker_.comm, model_->Parameters(), worker_.device);
  }
  if (trace_ != nullptr) {
    tracer_.emplace(*trace_, worker_.rank, worker_.device, *model_, *reducer_,
                    PrecisionName(config_.precision));
  }
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
  Restore(model_state, *model_, *optimizer_);
  start_epoch_ = static_cast<int>(state->epoch);
  start_batch_ = state->batch_in_epoch;
  // Saved after an epoch's last step: the saving run finished and reported
  // that epoch; this one starts the next.
  if (start_batch_ >= steps_per_epoch_) {
    ++start_epoch_;
    start_batch_ = 0;
  }
  if (talk) {
    log_ << "resumed from " << CheckpointPath(config_.checkpoint_dir) << " at step "
         << optimizer_->steps() << " (epoch " << start_epoch_ + 1 << ", batch "
         << start_batch_ << ")\n";
  }
  return true;
}

void WorkerRun::LogSetup() const {
  if (!root_ || config_.quiet) return;
  log_ << "model: " << model_->Describe() << " (" << ParameterCount(*model_)
       << " parameters), " << reducer_->num_buckets() << " gradient bucket(s)\n"
       << "data: " << data_.train.size() << " train / " << data_.test.size()
       << " test examples; " << worker_.size << " worker(s), mode "
       << ToString(config_.launch.mode) << ", device " << worker_.device << ", precision "
       << PrecisionName(config_.precision)
       << (config_.bf16_allreduce ? ", gradients all-reduced in bf16" : "") << "\n";
}

std::string WorkerRun::Title() const {
  std::string model = "MLP " + std::to_string(data_.train.images.dim(1));
  for (const int64_t size : config_.hidden) model += "-" + std::to_string(size);
  model += "-" + std::to_string(data_.train.num_classes);
  if (config_.precision != Precision::kFp32) {
    model += " " + std::string(PrecisionName(config_.precision));
  }
  return "Fashion-MNIST, " + model + ", " + std::to_string(worker_.size) +
         (worker_.size == 1 ? " worker" : " workers");
}

void WorkerRun::Save(int64_t epoch, int64_t batch_in_epoch) {
  CheckpointState state;
  if (root_) {
    TrainingProgress progress;
    progress.epoch = epoch;
    progress.batch_in_epoch = batch_in_epoch;
    progress.seed = config_.seed;
    state = Capture(*model_, *optimizer_, progress);
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

void WorkerRun::LoadShard(const std::vector<int64_t>& batch, Tensor& x, Tensor& y) {
  const std::vector<int64_t> shard = ShardIndices(batch, worker_.rank, worker_.size);
  const int64_t n = static_cast<int64_t>(shard.size());
  x = x_buffer_.Slice(0, n);
  y = y_buffer_.Slice(0, n);
  data::GatherRows(data_.train.images, shard, x);
  data::GatherRows(data_.train.labels, shard, y);
}

bool WorkerRun::Step(const std::vector<int64_t>& batch, int epoch, EpochTotals& totals) {
  ProfileRange range([&] { return "step " + std::to_string(optimizer_->steps() + 1); });
  Tensor x, y;
  LoadShard(batch, x, y);
  optimizer_->set_lr(ScheduledLr(schedule_, config_.optimizer.lr, optimizer_->steps(),
                                 total_steps_));
  optimizer_->ZeroGrad();
  const bool traced =
      tracer_ && global_step_ >= 1 && global_step_ < 1 + config_.trace_steps;
  if (traced) tracer_->Begin();
  Tensor logits = model_->Forward(x, traced ? tracer_->forward_hook() : nullptr);
  // Normalised by the global batch: see Note [Gradient averaging].
  Tensor step_loss;
  {
    ProfileRange loss_range("loss");
    step_loss = loss_.Forward(logits, y, static_cast<int64_t>(batch.size()));
  }
  if (traced) tracer_->LossDone();
  ++global_step_;
  if (SkipNonFinite(step_loss, epoch)) return false;
  ops::Axpy(1.f, step_loss, loss_sum_);
  reducer_->Backward(loss_.Backward());  // reduces and updates: see BuildModel
  if (traced) {
    tracer_->BackwardDone();
    tracer_->End();
  }
  totals.comm_wait += reducer_->last_comm_wait_seconds();
  if (step_log_) {
    const int64_t examples = static_cast<int64_t>(batch.size());
    const std::optional<StepRow> row =
        step_log_->After(optimizer_->steps(), epoch, examples, step_loss, optimizer_->lr());
    if (row && root_) report_->Step(*row);
  }
  ops::CountCorrect(logits, y, correct_);
  ops::Axpy(1.f, correct_, correct_sum_);
  return true;
}

bool WorkerRun::TrainEpoch(int epoch) {
  const auto epoch_start = Clock::now();
  data::BatchIterator batches(
      data::EpochOrder(data_.train.size(), config_.seed, epoch, /*shuffle=*/true),
      config_.batch_size);
  if (epoch == start_epoch_) batches.Seek(start_batch_);
  if (step_log_) step_log_->StartInterval();  // not the evaluation before
  ops::Fill(loss_sum_, 0.f);
  ops::Fill(correct_sum_, 0.f);
  std::optional<ProgressBar> bar;
  if (root_ && !config_.quiet) {
    // Into a file, a pipe or mpirun's merged output: one line per epoch.
    ProgressOptions options;
    options.plain_interval_seconds = std::numeric_limits<double>::infinity();
    bar.emplace(log_, "epoch " + std::to_string(epoch + 1) + "/" +
                          std::to_string(config_.epochs),
                batches.num_batches(), live_progress_, options);
  }
  EpochTotals totals;
  double running_loss = NAN;  // none read yet
  bool stop = false, saved = false;
  std::vector<int64_t> batch;
  while (!stop && batches.Next(batch)) {
    ++totals.steps;
    totals.examples += static_cast<int64_t>(batch.size());
    saved = false;
    if (Step(batch, epoch, totals)) {
      if (config_.checkpoint_every > 0 &&
          optimizer_->steps() % config_.checkpoint_every == 0) {
        Save(epoch, batches.position());
        saved = true;
      }
      if (bar && live_progress_) ShowProgress(*bar, batches, totals, running_loss);
    } else {
      ++totals.skipped;
    }
    stop = StopAfterStep();
  }
  // Where the run stopped, so that --resume continues from there.
  if (stop && !saved && !config_.checkpoint_dir.empty()) Save(epoch, batches.position());
  if (!config_.skip_nonfinite) CheckFinite(epoch);
  if (stop_signal_ != 0) return false;  // no evaluation: the run is asked to end
  Report(FinishEpoch(epoch, totals, Seconds(epoch_start)), bar);
  ++epochs_trained_;
  return !stop;
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
void WorkerRun::ShowProgress(ProgressBar& bar, const data::BatchIterator& batches,
                             const EpochTotals& totals, double& running_loss) {
  const int64_t done = batches.position();
  if (std::isnan(running_loss) || done % 20 == 0 || done == batches.num_batches()) {
    running_loss = loss_sum_.Item() * worker_.size /
                   std::max<int64_t>(1, totals.steps - totals.skipped);
  }
  bar.Update(done, std::min<int64_t>(done * config_.batch_size, data_.train.size()),
             running_loss);
}

EpochStats WorkerRun::FinishEpoch(int epoch, const EpochTotals& totals, double seconds) {
  // [loss, correct]: sums over ranks give the epoch's global figures.
  float sums[2] = {loss_sum_.Item(), correct_sum_.Item()};
  worker_.comm.AllReduce(sums, 2, ReduceOp::kSum)->Wait();
  const int64_t counted = totals.steps - totals.skipped;
  EpochStats stats;
  stats.epoch = epoch + 1;
  stats.loss = counted > 0 ? sums[0] / counted : NAN;
  // Over the examples this run saw (a resumed or stopped epoch is partial).
  stats.train_accuracy = sums[1] / std::max<double>(1.0, totals.examples);
  const TestFigures test = Evaluate();
  stats.test_loss = test.loss;
  stats.test_accuracy = test.accuracy;
  stats.samples_per_second = totals.examples / seconds;
  stats.comm_wait_seconds = totals.comm_wait;
  stats.skipped_steps = totals.skipped;
  return stats;
}

void WorkerRun::Report(const EpochStats& stats, std::optional<ProgressBar>& bar) {
  if (!root_) return;
  if (bar) {
    std::ostringstream summary;
    summary << std::fixed << "loss " << std::setprecision(4) << stats.loss << "  train_acc "
            << stats.train_accuracy << "  test_loss " << stats.test_loss << "  test_acc "
            << stats.test_accuracy
            << "  samples/s " << std::setprecision(0) << stats.samples_per_second
            << "  comm_wait " << std::setprecision(3) << stats.comm_wait_seconds << "s";
    if (stats.skipped_steps > 0) {
      summary << "  skipped " << stats.skipped_steps << " non-finite step(s)";
    }
    bar->Finish(summary.str());
  }
  report_->Epoch(stats, optimizer_->steps(), optimizer_->lr());
  std::lock_guard<std::mutex> lock(shared_.mutex);
  shared_.result.epochs.push_back(stats);
}

// Accuracy and mean loss over the test set: each rank evaluates its shard,
// the sums are summed over workers.
WorkerRun::TestFigures WorkerRun::Evaluate() {
  model_->SetTraining(false);
  const ShardRange shard = Shard(data_.test.size(), worker_.rank, worker_.size);
  const int64_t chunk = 2000;
  Tensor correct = Tensor::Zeros({1}, worker_.device);
  Tensor loss = Tensor::Zeros({1}, worker_.device);
  Tensor count = Tensor::Empty({1}, worker_.device);
  for (int64_t begin = shard.begin; begin < shard.end; begin += chunk) {
    const int64_t end = std::min(shard.end, begin + chunk);
    Tensor x = data_.test.images.Slice(begin, end).To(worker_.device);
    Tensor y = data_.test.labels.Slice(begin, end).To(worker_.device);
    Tensor logits = model_->Forward(x);
    ops::CountCorrect(logits, y, count);
    ops::Axpy(1.f, count, correct);
    // Divided by the whole test set: the chunks' and ranks' sum is the mean.
    ops::Axpy(1.f, test_loss_.Forward(logits, y, data_.test.size()), loss);
  }
  float sums[2] = {correct.Item(), loss.Item()};
  worker_.comm.AllReduce(sums, 2, ReduceOp::kSum)->Wait();
  model_->SetTraining(true);
  return {sums[0] / static_cast<double>(data_.test.size()), sums[1]};
}

void WorkerRun::Finish(bool stopped) {
  // A run resumed at its end trains no epoch: report the restored model's
  // test accuracy rather than none (collective: every worker evaluates).
  if (epochs_trained_ == 0 && stop_signal_ == 0) {
    const double accuracy = Evaluate().accuracy;
    if (root_) {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.result.test_accuracy = accuracy;
    }
  }
  if (!config_.checkpoint_dir.empty() && !stopped) Save(config_.epochs, 0);
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
  for (Parameter& p : model_->Parameters()) {
    const std::vector<float> v = p.value->ToVector();
    shared_.result.parameters.insert(shared_.result.parameters.end(), v.begin(), v.end());
  }
}

void WorkerRun::Run() {
  const bool resumed = config_.resume && Resume();
  if (root_) {
    // The epoch in progress at the checkpoint counts the epochs finished.
    report_.emplace(config_, Title(),
                    resumed ? std::optional<int>(start_epoch_) : std::nullopt);
  }
  LogSetup();
  // Resumed at --max_steps: nothing to train.
  bool stopped = config_.max_steps > 0 && optimizer_->steps() >= config_.max_steps;
  for (int epoch = start_epoch_; epoch < config_.epochs && !stopped; ++epoch) {
    stopped = !TrainEpoch(epoch);
  }
  Finish(stopped);
}

}  // namespace

TrainResult TrainFashionMnist(const TrainConfig& config, std::ostream& log) {
  CheckConfig(config);
  const Datasets data = LoadData(config);
  CheckResumable(config, data.train.size());
  SharedResult shared;
  const auto start = Clock::now();
  // One trace for all workers of this process (threads mode); under mpirun
  // rank 0 writes its own steps.
  std::unique_ptr<ChromeTrace> trace;
  if (!config.trace_path.empty()) trace = std::make_unique<ChromeTrace>();
  // A lone worker's error is the run's, as it is: "worker 0 failed: " would
  // add nothing, and a UsageError must stay one (the command line exits 2).
  const bool lone = config.launch.mode == LaunchMode::kThreads &&
                    config.launch.workers.value_or(1) == 1;
  std::exception_ptr lone_error;
  Launch(config.launch, [&](Worker& worker) {
    try {
      WorkerRun(config, data, worker, log, trace.get(), shared).Run();
    } catch (...) {
      if (!lone) throw;
      lone_error = std::current_exception();
    }
  });
  if (lone_error) std::rethrow_exception(lone_error);
  TrainResult& result = shared.result;
  result.seconds = Seconds(start);
  if (trace) {
    std::string path = config.trace_path;
    if (config.launch.mode == LaunchMode::kMpi && !result.is_root) path = "";  // rank 0 only
    if (!path.empty()) trace->Write(path);
  }
  if (!result.epochs.empty()) result.test_accuracy = result.epochs.back().test_accuracy;
  return result;
}

}  // namespace tandem
