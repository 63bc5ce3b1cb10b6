#include "examples/fashion_mnist/train.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/check.h"
#include "data/batch_iterator.h"
#include "data/idx_reader.h"
#include "data/normalize.h"
#include "core/ops.h"
#include "report/chrome_trace.h"
#include "report/metrics_log.h"
#include "report/progress.h"
#include "report/svg_plot.h"
#include "examples/fashion_mnist/step_tracer.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "layers/loss.h"
#include "layers/lr_schedule.h"
#include "layers/mlp.h"
#include "parallel/checkpointer.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"

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

// Accuracy of rank's shard of `data`, summed over workers.
double Evaluate(Sequential& model, const data::Dataset& data, Worker& worker) {
  model.SetTraining(false);
  const ShardRange shard = Shard(data.size(), worker.rank, worker.size);
  const int64_t chunk = 2000;
  Tensor correct = Tensor::Zeros({1}, worker.device);
  Tensor count = Tensor::Empty({1}, worker.device);
  for (int64_t begin = shard.begin; begin < shard.end; begin += chunk) {
    const int64_t end = std::min(shard.end, begin + chunk);
    Tensor x = data.images.Slice(begin, end).To(worker.device);
    Tensor y = data.labels.Slice(begin, end).To(worker.device);
    ops::CountCorrect(model.Forward(x), y, count);
    ops::Axpy(1.f, count, correct);
  }
  float total = correct.Item();
  worker.comm.AllReduce(&total, 1, ReduceOp::kSum);
  model.SetTraining(true);
  return total / static_cast<double>(data.size());
}

}  // namespace

TrainResult TrainFashionMnist(const TrainConfig& config, std::ostream& log) {
  Validate(config);
  data::Dataset train = data::LoadFashionMnist(config.data_dir, true, config.max_train);
  data::Dataset test = data::LoadFashionMnist(config.data_dir, false, config.max_test);
  // Statistics of the training set only, applied to both.
  const data::Normalization norm = data::ComputeNormalization(train.images);
  data::Normalize(norm, train.images);
  data::Normalize(norm, test.images);

  std::vector<int64_t> sizes = {train.images.dim(1)};
  for (int64_t h : config.hidden) sizes.push_back(h);
  sizes.push_back(train.num_classes);

  TrainResult result;
  std::mutex result_mutex;
  const auto start = Clock::now();
  // One trace for all workers of this process (threads mode); under mpirun
  // each rank writes its own file (path.rankR).
  std::unique_ptr<ChromeTrace> trace;
  if (!config.trace_path.empty()) trace = std::make_unique<ChromeTrace>();
  Launch(config.launch, [&](Worker& worker) {
    const bool root = worker.is_root();
    std::optional<MetricsLog> metrics;
    if (root && !config.metrics_path.empty()) metrics.emplace(config.metrics_path);
    std::vector<double> plot_loss, plot_train_acc, plot_test_acc;
    Rng rng(config.seed);
    MlpOptions mlp;
    mlp.dropout = config.dropout;
    mlp.dropout_seed = config.seed + 1 + 1000 * worker.rank;
    mlp.device = worker.device;
    auto model = Mlp(sizes, ParseActivation(config.activation), rng, mlp);
    ReducerOptions reducer_options;
    reducer_options.bucket_bytes = static_cast<int64_t>(config.bucket_mb * (1 << 20));
    reducer_options.overlap = config.overlap;
    Reducer reducer(*model, worker.gradient_lanes(), reducer_options);
    std::optional<StepTracer> tracer;
    if (trace) tracer.emplace(*trace, worker.rank, worker.device, *model, reducer);
    auto optimizer = MakeOptimizer(config.optimizer, model->Parameters());
    // Each bucket is updated as soon as it is reduced (on GPUs beside
    // backward); optimizer->Step() below then only counts the step.
    reducer.set_optimizer(optimizer.get());
    SoftmaxCrossEntropyLoss loss;

    // Resume: every rank reads the file itself; Restore checks everything
    // before changing anything. See Note [Resuming with another worker
    // count] in parallel/checkpointer.cc.
    int start_epoch = 0;
    int64_t start_batch = 0;
    const std::vector<uint64_t> run_key = {config.seed, static_cast<uint64_t>(config.batch_size),
                                           static_cast<uint64_t>(train.size())};
    if (config.resume) {
      std::optional<CheckpointState> state = LoadLatestCheckpoint(config.checkpoint_dir);
      if (state) {
        auto key = state->extra_u64.find(kRunKey);
        TANDEM_CHECK(key != state->extra_u64.end() && key->second == run_key)
            << CheckpointPath(config.checkpoint_dir)
            << " was saved by a run with another --seed, --batch_size or training set "
               "(--max_train); resuming would change the data order";
        CheckpointState model_state = *state;
        model_state.extra_u64.erase(kRunKey);
        Restore(model_state, *model, *optimizer);
        start_epoch = static_cast<int>(state->epoch);
        start_batch = state->batch_in_epoch;
        if (root && !config.quiet) {
          log << "resumed from " << CheckpointPath(config.checkpoint_dir) << " at step "
              << optimizer->steps() << " (epoch " << start_epoch + 1 << ", batch "
              << start_batch << ")\n";
        }
      } else if (root && !config.quiet) {
        log << "no checkpoint in " << config.checkpoint_dir << ": starting afresh\n";
      }
    }
    auto save = [&](int64_t epoch, int64_t batch_in_epoch) {
      CheckpointState state;
      if (root) {
        TrainingProgress progress;
        progress.epoch = epoch;
        progress.batch_in_epoch = batch_in_epoch;
        progress.seed = config.seed;
        state = Capture(*model, *optimizer, progress);
        state.extra_u64[kRunKey] = run_key;
      }
      // Collective: every rank calls it at the same step; rank 0 writes.
      SaveCheckpoint(worker.comm, config.checkpoint_dir, state);
    };
    bool stop = false;

    if (root && !config.quiet) {
      log << "model: " << model->Describe() << " (" << ParameterCount(*model)
          << " parameters), " << reducer.num_buckets() << " gradient bucket(s)\n"
          << "data: " << train.size() << " train / " << test.size()
          << " test examples; " << worker.size << " worker(s), mode "
          << config.launch.mode << ", device " << worker.device << "\n";
    }

    const int64_t max_shard = Shard(config.batch_size, 0, worker.size).size();
    Tensor x_buffer = Tensor::Empty({max_shard, train.images.dim(1)}, worker.device);
    Tensor y_buffer = Tensor::Empty({max_shard}, worker.device);
    Tensor loss_sum = Tensor::Empty({1}, worker.device);
    Tensor correct_sum = Tensor::Empty({1}, worker.device);
    Tensor correct = Tensor::Empty({1}, worker.device);
    // The first step whose loss was not finite, -1 while none: see
    // ops::TrackNonFinite. Read every kCheckEvery steps, not every step.
    Tensor first_bad = Tensor::Full({1}, -1.f, worker.device);
    constexpr int64_t kCheckEvery = 50;
    int64_t global_step = 0;
    auto check_finite = [&](int epoch) {
      const float bad = first_bad.Item();
      TANDEM_CHECK(bad < 0.f)
          << "the loss is not finite (NaN or Inf) at step " << static_cast<int64_t>(bad)
          << " (epoch " << epoch + 1 << ", rank " << worker.rank
          << "): training stopped; lower --lr, or pass --skip_nonfinite to skip such steps";
    };
    std::vector<int64_t> batch;
    const LrSchedule schedule = ParseLrSchedule(config.lr_schedule);
    const int64_t steps_per_epoch =
        (train.size() + config.batch_size - 1) / config.batch_size;
    const int64_t total_steps = steps_per_epoch * config.epochs;

    for (int epoch = start_epoch; epoch < config.epochs && !stop; ++epoch) {
      const auto epoch_start = Clock::now();
      data::BatchIterator batches(
          data::EpochOrder(train.size(), config.seed, epoch, /*shuffle=*/true),
          config.batch_size);
      if (epoch == start_epoch) batches.Seek(start_batch);
      ops::Fill(loss_sum, 0.f);
      ops::Fill(correct_sum, 0.f);
      double comm_wait = 0.0;
      int64_t skipped = 0;
      std::optional<ProgressBar> bar;
      if (root && !config.quiet) {
        bar.emplace(log, "epoch " + std::to_string(epoch + 1) + "/" +
                             std::to_string(config.epochs),
                    batches.num_batches(), IsTerminal(log));
      }
      double running_loss = NAN;
      int64_t steps_this_epoch = 0, examples_this_epoch = 0;
      while (batches.Next(batch)) {
        ++steps_this_epoch;
        examples_this_epoch += static_cast<int64_t>(batch.size());
        const std::vector<int64_t> shard = ShardIndices(batch, worker.rank, worker.size);
        const int64_t n = static_cast<int64_t>(shard.size());
        Tensor x = x_buffer.Slice(0, n);
        Tensor y = y_buffer.Slice(0, n);
        data::GatherRows(train.images, shard, x);
        data::GatherRows(train.labels, shard, y);

        optimizer->set_lr(ScheduledLr(schedule, config.optimizer.lr,
                                      optimizer->steps(), total_steps));
        optimizer->ZeroGrad();
        const bool traced = tracer && global_step >= 1 &&
                            global_step < 1 + config.trace_steps;
        if (traced) tracer->Begin();
        Tensor logits = model->Forward(x, traced ? tracer->forward_hook() : nullptr);
        // Normalised by the global batch: see Note [Gradient averaging].
        Tensor step_loss = loss.Forward(logits, y, static_cast<int64_t>(batch.size()));
        if (traced) tracer->LossDone();
        ++global_step;
        if (config.skip_nonfinite) {
          // Every rank must skip the same steps, or their collectives would
          // no longer pair up: agree on it through the host communicator.
          float bad = std::isfinite(step_loss.Item()) ? 0.f : 1.f;
          worker.comm.AllReduce(&bad, 1, ReduceOp::kSum);
          if (bad > 0.f) {
            ++skipped;
            continue;
          }
        } else {
          ops::TrackNonFinite(step_loss, global_step, first_bad);
          if (global_step % kCheckEvery == 0) check_finite(epoch);
        }
        ops::Axpy(1.f, step_loss, loss_sum);
        reducer.Backward(loss.Backward());
        if (traced) tracer->BackwardDone();
        optimizer->Step();
        if (traced) tracer->End();
        if (config.checkpoint_every > 0 &&
            optimizer->steps() % config.checkpoint_every == 0) {
          save(epoch, batches.position());
        }
        comm_wait += reducer.last_comm_wait_seconds();
        ops::CountCorrect(logits, y, correct);
        ops::Axpy(1.f, correct, correct_sum);
        if (bar) {
          // Reading the loss waits for the device: only now and then. The
          // local sum times the worker count estimates the global mean.
          const int64_t done = batches.position();
          if (done % 20 == 0 || done == batches.num_batches()) {
            running_loss = loss_sum.Item() * worker.size /
                           std::max<int64_t>(1, steps_this_epoch - skipped);
          }
          bar->Update(done, std::min<int64_t>(done * config.batch_size, train.size()),
                      running_loss);
        }
        if (config.max_steps > 0 && optimizer->steps() >= config.max_steps) {
          stop = true;
          break;
        }
      }
      if (!config.skip_nonfinite) check_finite(epoch);
      const double train_seconds = Seconds(epoch_start);
      // [loss, correct]: sums over ranks give the epoch's global figures.
      float totals[2] = {loss_sum.Item(), correct_sum.Item()};
      worker.comm.AllReduce(totals, 2, ReduceOp::kSum);
      const int64_t counted = steps_this_epoch - skipped;
      const double mean_loss = counted > 0 ? totals[0] / counted : NAN;
      EpochStats stats;
      stats.epoch = epoch + 1;
      stats.loss = mean_loss;
      // Over the examples this run saw (a resumed or stopped epoch is partial).
      stats.train_accuracy = totals[1] / std::max<double>(1.0, examples_this_epoch);
      stats.test_accuracy = Evaluate(*model, test, worker);
      stats.samples_per_second = examples_this_epoch / train_seconds;
      stats.comm_wait_seconds = comm_wait;
      stats.skipped_steps = skipped;
      if (root) {
        if (bar) {
          std::ostringstream summary;
          summary << std::fixed << "loss " << std::setprecision(4) << stats.loss
                  << "  train_acc " << stats.train_accuracy << "  test_acc "
                  << stats.test_accuracy << "  samples/s " << std::setprecision(0)
                  << stats.samples_per_second << "  comm_wait "
                  << std::setprecision(3) << stats.comm_wait_seconds << "s";
          if (skipped > 0) summary << "  skipped " << skipped << " non-finite step(s)";
          bar->Finish(summary.str());
        }
        if (metrics) {
          const double e = stats.epoch;
          const double step = static_cast<double>(optimizer->steps());
          metrics->Write({{"epoch", e}, {"step", step}, {"loss", stats.loss},
                          {"accuracy", stats.train_accuracy},
                          {"samples_per_second", stats.samples_per_second},
                          {"comm_wait_seconds", stats.comm_wait_seconds},
                          {"lr", optimizer->lr()}},
                         {{"split", "train"}});
          metrics->Write({{"epoch", e}, {"step", step}, {"accuracy", stats.test_accuracy}},
                         {{"split", "test"}});
        }
        if (!config.plot_path.empty()) {
          plot_loss.push_back(stats.loss);
          plot_train_acc.push_back(stats.train_accuracy);
          plot_test_acc.push_back(stats.test_accuracy);
          // Rewritten every epoch, so an interrupted run still has its plot.
          WritePlot(config.plot_path, {{"train", {}, plot_loss}},
                    {{"train", {}, plot_train_acc}, {"test", {}, plot_test_acc}},
                    "Fashion-MNIST " + model->Describe() + ", " +
                        std::to_string(worker.size) + " worker(s)");
        }
        std::lock_guard<std::mutex> lock(result_mutex);
        result.epochs.push_back(stats);
      }
    }
    // A run resumed at its end trains no epoch: report the restored model's
    // test accuracy rather than none (collective: every worker evaluates).
    if (start_epoch >= config.epochs) {
      const double accuracy = Evaluate(*model, test, worker);
      if (root) {
        std::lock_guard<std::mutex> lock(result_mutex);
        result.test_accuracy = accuracy;
      }
    }
    if (!config.checkpoint_dir.empty() && !stop) save(config.epochs, 0);
    if (root) {
      std::lock_guard<std::mutex> lock(result_mutex);
      for (Parameter& p : model->Parameters()) {
        const std::vector<float> v = p.value->ToVector();
        result.parameters.insert(result.parameters.end(), v.begin(), v.end());
      }
    } else if (config.launch.mode == "mpi") {
      std::lock_guard<std::mutex> lock(result_mutex);
      result.is_root = false;
    }
  });
  result.seconds = Seconds(start);
  if (trace) {
    std::string path = config.trace_path;
    if (config.launch.mode == "mpi" && !result.is_root) path = ""; // rank 0 only
    if (!path.empty()) trace->Write(path);
  }
  if (!result.epochs.empty()) result.test_accuracy = result.epochs.back().test_accuracy;
  return result;
}

}  // namespace tandem
