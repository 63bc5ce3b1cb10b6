#include "examples/fashion_mnist/train.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "data/batch_iterator.h"
#include "data/idx_reader.h"
#include "data/normalize.h"
#include "examples/fashion_mnist/step_tracer.h"
#include "io/checkpoint.h"
#include "layers/loss.h"
#include "layers/lr_schedule.h"
#include "layers/mlp.h"
#include "parallel/checkpointer.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"
#include "report/chrome_trace.h"
#include "report/metrics_log.h"
#include "report/progress.h"
#include "report/svg_plot.h"

namespace tandem {

std::vector<int64_t> ParseSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    TANDEM_CHECK(*end == '\0' && v > 0)
        << "--hidden must be positive sizes separated by commas (e.g. 512,256), got '"
        << text << "'";
    sizes.push_back(v);
  }
  return sizes;
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void Validate(const TrainConfig& c) {
  TANDEM_CHECK(c.epochs >= 1) << "--epochs must be at least 1, got " << c.epochs;
  TANDEM_CHECK(c.batch_size >= 1) << "--batch_size must be at least 1, got "
                                  << c.batch_size;
  TANDEM_CHECK(c.bucket_mb > 0) << "--bucket_mb must be positive, got " << c.bucket_mb;
  TANDEM_CHECK(c.dropout >= 0 && c.dropout < 1)
      << "--dropout must be in [0, 1), got " << c.dropout;
  if (c.launch.workers.has_value()) {
    TANDEM_CHECK(c.batch_size >= *c.launch.workers)
        << "--batch_size=" << c.batch_size << " is smaller than --workers="
        << *c.launch.workers << ": every worker needs at least one example";
  }
  ParseActivation(c.activation);
  ParseLrSchedule(c.lr_schedule);
  ValidateOptimizerConfig(c.optimizer);
  TANDEM_CHECK(c.checkpoint_every >= 0)
      << "--checkpoint_every must not be negative, got " << c.checkpoint_every;
  TANDEM_CHECK(!c.resume || !c.checkpoint_dir.empty())
      << "--resume needs --checkpoint_dir";
  TANDEM_CHECK(c.checkpoint_every == 0 || !c.checkpoint_dir.empty())
      << "--checkpoint_every needs --checkpoint_dir";
  TANDEM_CHECK(c.max_steps >= 0) << "--max_steps must not be negative, got " << c.max_steps;
}

// What a checkpoint must match to be resumed by this configuration: the
// data order and the meaning of its position depend on them.
constexpr char kRunKey[] = "run.seed_batch_examples";

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
  void BuildModel();
  void Resume();
  void LogSetup() const;
  // Trains one epoch; false once --max_steps is reached.
  bool TrainEpoch(int epoch);
  // One step on `batch`; false when it was skipped (non-finite loss).
  bool Step(const std::vector<int64_t>& batch, int epoch, EpochTotals& totals);
  void LoadShard(const std::vector<int64_t>& batch, Tensor& x, Tensor& y);
  bool SkipNonFinite(const Tensor& step_loss, int epoch);
  void CheckFinite(int epoch);
  EpochStats FinishEpoch(int epoch, const EpochTotals& totals, double seconds);
  void Report(const EpochStats& stats, std::optional<ProgressBar>& bar);
  void Save(int64_t epoch, int64_t batch_in_epoch);
  double Evaluate();
  void Finish(bool stopped);

  const TrainConfig& config_;
  const Datasets& data_;
  Worker& worker_;
  std::ostream& log_;
  ChromeTrace* trace_;
  SharedResult& shared_;
  const bool root_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<StepTracer> tracer_;
  std::optional<MetricsLog> metrics_;
  SoftmaxCrossEntropyLoss loss_;
  std::vector<uint64_t> run_key_;
  int start_epoch_ = 0;
  int64_t start_batch_ = 0;
  int64_t global_step_ = 0;
  int64_t total_steps_ = 0;
  LrSchedule schedule_;
  Tensor x_buffer_, y_buffer_, loss_sum_, correct_sum_, correct_;
  // The first step whose loss was not finite, -1 while none: see
  // ops::TrackNonFinite. Read every kCheckEvery steps, not every step.
  Tensor first_bad_;
  static constexpr int64_t kCheckEvery = 50;
  std::vector<double> plot_loss_, plot_train_acc_, plot_test_acc_;
};

WorkerRun::WorkerRun(const TrainConfig& config, const Datasets& data, Worker& worker,
                     std::ostream& log, ChromeTrace* trace, SharedResult& shared)
    : config_(config), data_(data), worker_(worker), log_(log), trace_(trace),
      shared_(shared), root_(worker.is_root()),
      schedule_(ParseLrSchedule(config.lr_schedule)) {
  if (root_ && !config.metrics_path.empty()) metrics_.emplace(config.metrics_path);
  run_key_ = {config.seed, static_cast<uint64_t>(config.batch_size),
              static_cast<uint64_t>(data.train.size())};
  const int64_t steps_per_epoch =
      (data.train.size() + config.batch_size - 1) / config.batch_size;
  total_steps_ = steps_per_epoch * config.epochs;
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
  if (trace_ != nullptr) {
    tracer_.emplace(*trace_, worker_.rank, worker_.device, *model_, *reducer_,
                    PrecisionName(config_.precision));
  }
}

// Every rank reads the file itself; Restore checks everything before
// changing anything. See Note [Resuming with another worker count] in
// parallel/checkpointer.cc.
void WorkerRun::Resume() {
  std::optional<CheckpointState> state = LoadLatestCheckpoint(config_.checkpoint_dir);
  const bool talk = root_ && !config_.quiet;
  if (!state) {
    if (talk) log_ << "no checkpoint in " << config_.checkpoint_dir << ": starting afresh\n";
    return;
  }
  auto key = state->extra_u64.find(kRunKey);
  TANDEM_CHECK(key != state->extra_u64.end() && key->second == run_key_)
      << CheckpointPath(config_.checkpoint_dir)
      << " was saved by a run with another --seed, --batch_size or training set "
         "(--max_train); resuming would change the data order";
  CheckpointState model_state = *state;
  model_state.extra_u64.erase(kRunKey);
  Restore(model_state, *model_, *optimizer_);
  start_epoch_ = static_cast<int>(state->epoch);
  start_batch_ = state->batch_in_epoch;
  if (talk) {
    log_ << "resumed from " << CheckpointPath(config_.checkpoint_dir) << " at step "
         << optimizer_->steps() << " (epoch " << start_epoch_ + 1 << ", batch "
         << start_batch_ << ")\n";
  }
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
  Tensor step_loss = loss_.Forward(logits, y, static_cast<int64_t>(batch.size()));
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
  ops::Fill(loss_sum_, 0.f);
  ops::Fill(correct_sum_, 0.f);
  std::optional<ProgressBar> bar;
  if (root_ && !config_.quiet) {
    bar.emplace(log_, "epoch " + std::to_string(epoch + 1) + "/" +
                          std::to_string(config_.epochs),
                batches.num_batches(), IsTerminal(log_));
  }
  EpochTotals totals;
  double running_loss = NAN;
  bool stop = false;
  std::vector<int64_t> batch;
  while (!stop && batches.Next(batch)) {
    ++totals.steps;
    totals.examples += static_cast<int64_t>(batch.size());
    if (!Step(batch, epoch, totals)) {
      ++totals.skipped;
      continue;
    }
    if (config_.checkpoint_every > 0 && optimizer_->steps() % config_.checkpoint_every == 0) {
      Save(epoch, batches.position());
    }
    if (bar) {
      // Reading the loss waits for the device: only now and then. The local
      // sum times the worker count estimates the global mean.
      const int64_t done = batches.position();
      if (done % 20 == 0 || done == batches.num_batches()) {
        running_loss = loss_sum_.Item() * worker_.size /
                       std::max<int64_t>(1, totals.steps - totals.skipped);
      }
      bar->Update(done, std::min<int64_t>(done * config_.batch_size, data_.train.size()),
                  running_loss);
    }
    stop = config_.max_steps > 0 && optimizer_->steps() >= config_.max_steps;
  }
  if (!config_.skip_nonfinite) CheckFinite(epoch);
  Report(FinishEpoch(epoch, totals, Seconds(epoch_start)), bar);
  return !stop;
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
  stats.test_accuracy = Evaluate();
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
            << stats.train_accuracy << "  test_acc " << stats.test_accuracy
            << "  samples/s " << std::setprecision(0) << stats.samples_per_second
            << "  comm_wait " << std::setprecision(3) << stats.comm_wait_seconds << "s";
    if (stats.skipped_steps > 0) {
      summary << "  skipped " << stats.skipped_steps << " non-finite step(s)";
    }
    bar->Finish(summary.str());
  }
  if (metrics_) {
    const double e = stats.epoch;
    const double step = static_cast<double>(optimizer_->steps());
    metrics_->Write({{"epoch", e}, {"step", step}, {"loss", stats.loss},
                     {"accuracy", stats.train_accuracy},
                     {"samples_per_second", stats.samples_per_second},
                     {"comm_wait_seconds", stats.comm_wait_seconds},
                     {"lr", optimizer_->lr()}},
                    {{"split", "train"}, {"precision", PrecisionName(config_.precision)}});
    metrics_->Write({{"epoch", e}, {"step", step}, {"accuracy", stats.test_accuracy}},
                    {{"split", "test"}, {"precision", PrecisionName(config_.precision)}});
  }
  if (!config_.plot_path.empty()) {
    plot_loss_.push_back(stats.loss);
    plot_train_acc_.push_back(stats.train_accuracy);
    plot_test_acc_.push_back(stats.test_accuracy);
    // Rewritten every epoch, so an interrupted run still has its plot.
    WritePlot(config_.plot_path, {{"train", {}, plot_loss_}},
              {{"train", {}, plot_train_acc_}, {"test", {}, plot_test_acc_}},
              "Fashion-MNIST " + model_->Describe() + ", " +
                  std::to_string(worker_.size) + " worker(s)");
  }
  std::lock_guard<std::mutex> lock(shared_.mutex);
  shared_.result.epochs.push_back(stats);
}

// Accuracy of this rank's shard of the test set, summed over workers.
double WorkerRun::Evaluate() {
  model_->SetTraining(false);
  const ShardRange shard = Shard(data_.test.size(), worker_.rank, worker_.size);
  const int64_t chunk = 2000;
  Tensor correct = Tensor::Zeros({1}, worker_.device);
  Tensor count = Tensor::Empty({1}, worker_.device);
  for (int64_t begin = shard.begin; begin < shard.end; begin += chunk) {
    const int64_t end = std::min(shard.end, begin + chunk);
    Tensor x = data_.test.images.Slice(begin, end).To(worker_.device);
    Tensor y = data_.test.labels.Slice(begin, end).To(worker_.device);
    ops::CountCorrect(model_->Forward(x), y, count);
    ops::Axpy(1.f, count, correct);
  }
  float total = correct.Item();
  worker_.comm.AllReduce(&total, 1, ReduceOp::kSum)->Wait();
  model_->SetTraining(true);
  return total / static_cast<double>(data_.test.size());
}

void WorkerRun::Finish(bool stopped) {
  // A run resumed at its end trains no epoch: report the restored model's
  // test accuracy rather than none (collective: every worker evaluates).
  if (start_epoch_ >= config_.epochs) {
    const double accuracy = Evaluate();
    if (root_) {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.result.test_accuracy = accuracy;
    }
  }
  if (!config_.checkpoint_dir.empty() && !stopped) Save(config_.epochs, 0);
  std::lock_guard<std::mutex> lock(shared_.mutex);
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
  if (config_.resume) Resume();
  LogSetup();
  bool stopped = false;
  for (int epoch = start_epoch_; epoch < config_.epochs && !stopped; ++epoch) {
    stopped = !TrainEpoch(epoch);
  }
  Finish(stopped);
}

}  // namespace

TrainResult TrainFashionMnist(const TrainConfig& config, std::ostream& log) {
  Validate(config);
  const Datasets data = LoadData(config);
  SharedResult shared;
  const auto start = Clock::now();
  // One trace for all workers of this process (threads mode); under mpirun
  // each rank writes its own file (path.rankR).
  std::unique_ptr<ChromeTrace> trace;
  if (!config.trace_path.empty()) trace = std::make_unique<ChromeTrace>();
  Launch(config.launch, [&](Worker& worker) {
    WorkerRun(config, data, worker, log, trace.get(), shared).Run();
  });
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
