#include "examples/char_lm/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"
#include "data/batch_iterator.h"
#include "examples/char_lm/sample.h"
#include "layers/loss.h"
#include "layers/lr_schedule.h"
#include "layers/optimizer.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"

namespace tandem {
namespace char_lm {

float WarmupCosineLr(float lr, int64_t step, int64_t total, int64_t warmup) {
  const float ramp = warmup > 0 ? std::min(1.f, static_cast<float>(step + 1) / warmup) : 1.f;
  return ramp * ScheduledLr(LrSchedule::kCosine, lr, step, total);
}

namespace {

using Clock = std::chrono::steady_clock;

// The words, split and windowed once, shared by every worker.
struct Corpus {
  Vocabulary vocab;
  WordSplit split;
  Windows train, validation;
  double bigram_loss;
};

Corpus LoadCorpus(const CharLmConfig& config) {
  const std::vector<std::u32string> words = LoadWords(config.words_path);
  Corpus c;
  c.vocab = Vocabulary::FromWords(words);
  c.split = SplitWords(words, kSplitSeed);
  TANDEM_CHECK(!c.split.validation.empty())
      << "the word list " << config.words_path << " has too few words for a validation split ("
      << words.size() << " words)";
  c.train = MakeWindows(c.split.train, c.vocab, config.model.context);
  c.validation = MakeWindows(c.split.validation, c.vocab, config.model.context);
  c.bigram_loss = BigramLoss(c.split.train, c.split.validation, c.vocab);
  return c;
}

int64_t TotalSteps(const CharLmConfig& config, const Corpus& corpus) {
  if (config.epochs <= 0) return config.steps;
  const int64_t per_epoch = (corpus.train.size() + config.batch_size - 1) / config.batch_size;
  return per_epoch * config.epochs;
}

std::string Fixed(double value, int digits = 4) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// One worker's run: the model, its reducer and optimizer, the steps and the
// evaluations; rank 0 logs.
class WorkerRun {
 public:
  WorkerRun(const CharLmConfig& config, const Corpus& corpus, Worker& worker, std::ostream& log);
  // Trains; fills `result` on rank 0.
  void Run(CharLmResult& result);

 private:
  void Step(const std::vector<int64_t>& batch);
  double Evaluate();
  EvalRow Report(int64_t step, int64_t steps_since, Clock::time_point start);

  const CharLmConfig& config_;
  const Corpus& corpus_;
  Worker& worker_;
  std::ostream& log_;
  const int64_t total_steps_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Reducer> reducer_;
  SoftmaxCrossEntropyLoss loss_, val_loss_;
  Tensor x_buffer_, y_buffer_, loss_sum_;
};

WorkerRun::WorkerRun(const CharLmConfig& config, const Corpus& corpus, Worker& worker,
                     std::ostream& log)
    : config_(config), corpus_(corpus), worker_(worker), log_(log),
      total_steps_(TotalSteps(config, corpus)) {
  ModelConfig model = config.model;
  model.vocab = corpus.vocab.size();
  model.device = worker.device;
  Rng rng(config.seed);
  model_ = BuildCharLm(model, rng);
  reducer_ = std::make_unique<Reducer>(*model_, worker.gradient_lanes());
  OptimizerConfig adamw;
  adamw.lr = config.lr;
  adamw.weight_decay = config.weight_decay;
  optimizer_ = MakeOptimizer(adamw, model_->Parameters());
  // Each bucket is updated once reduced: no optimizer_->Step() below.
  reducer_->RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer_));
  const int64_t max_shard = Shard(config.batch_size, 0, worker.size).size();
  x_buffer_ = Tensor::Empty({max_shard, model.context}, worker.device);
  y_buffer_ = Tensor::Empty({max_shard}, worker.device);
  loss_sum_ = Tensor::Zeros({1}, worker.device);
}

void WorkerRun::Step(const std::vector<int64_t>& batch) {
  const std::vector<int64_t> shard = ShardIndices(batch, worker_.rank, worker_.size);
  const int64_t n = static_cast<int64_t>(shard.size());
  Tensor x = x_buffer_.Slice(0, n), y = y_buffer_.Slice(0, n);
  data::GatherRows(corpus_.train.contexts, shard, x);
  data::GatherRows(corpus_.train.next, shard, y);
  optimizer_->set_lr(WarmupCosineLr(config_.lr, optimizer_->steps(), total_steps_,
                                    config_.warmup));
  optimizer_->ZeroGrad();
  Tensor logits = model_->Forward(x);
  // Over the global batch: the workers' gradients sum to its mean's.
  ops::Axpy(1.f, loss_.Forward(logits, y, static_cast<int64_t>(batch.size())), loss_sum_);
  reducer_->Backward(loss_.Backward());
}

// The mean loss over the validation split: each worker its shard, in
// chunks; the sums are summed over the workers.
double WorkerRun::Evaluate() {
  model_->SetTraining(false);
  const int64_t total = corpus_.validation.size();
  const ShardRange shard = Shard(total, worker_.rank, worker_.size);
  Tensor sum = Tensor::Zeros({1}, worker_.device);
  constexpr int64_t kChunk = 4096;
  for (int64_t begin = shard.begin; begin < shard.end; begin += kChunk) {
    const int64_t end = std::min(shard.end, begin + kChunk);
    Tensor x = corpus_.validation.contexts.Slice(begin, end).To(worker_.device);
    Tensor y = corpus_.validation.next.Slice(begin, end).To(worker_.device);
    ops::Axpy(1.f, val_loss_.Forward(model_->Forward(x), y, total), sum);
  }
  float value = sum.Item();
  worker_.comm.AllReduce(&value, 1, ReduceOp::kSum)->Wait();
  model_->SetTraining(true);
  return value;
}

EvalRow WorkerRun::Report(int64_t step, int64_t steps_since, Clock::time_point start) {
  float train = loss_sum_.Item();
  worker_.comm.AllReduce(&train, 1, ReduceOp::kSum)->Wait();
  ops::Fill(loss_sum_, 0.f);
  EvalRow row{step, train / std::max<int64_t>(1, steps_since), Evaluate(),
              std::chrono::duration<double>(Clock::now() - start).count()};
  TANDEM_CHECK(std::isfinite(row.train_loss) && std::isfinite(row.val_loss))
      << "the loss is not finite at step " << step << ": lower --lr";
  if (worker_.is_root()) {
    log_ << "step " << std::setw(6) << step << "/" << total_steps_ << "  train_loss "
         << Fixed(row.train_loss) << "  val_loss " << Fixed(row.val_loss) << "  ("
         << Fixed(row.seconds, 1) << " s)" << std::endl;
  }
  return row;
}

void WorkerRun::Run(CharLmResult& result) {
  if (worker_.is_root()) {
    log_ << "model: " << model_->Describe() << " (" << ParameterCount(*model_)
         << " parameters); " << worker_.size << " worker(s), mode "
         << ToString(config_.launch.mode) << ", device " << worker_.device << ", precision "
         << PrecisionName(config_.model.precision) << "\n"
         << "training " << total_steps_ << " steps of " << config_.batch_size
         << " examples" << std::endl;
  }
  const auto start = Clock::now();
  int64_t epoch = 0, last_report = 0;
  data::BatchIterator batches(data::EpochOrder(corpus_.train.size(), config_.seed, 0, true),
                              config_.batch_size);
  std::vector<int64_t> batch;
  for (int64_t step = 1; step <= total_steps_; ++step) {
    if (!batches.Next(batch)) {
      batches = data::BatchIterator(
          data::EpochOrder(corpus_.train.size(), config_.seed, ++epoch, true), config_.batch_size);
      batches.Next(batch);
    }
    Step(batch);
    const bool eval = config_.eval_every > 0 && step % config_.eval_every == 0;
    if (eval || step == total_steps_) {
      result.evals.push_back(Report(step, step - last_report, start));
      last_report = step;
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result.evals.empty()) {
    result.train_loss = result.evals.back().train_loss;
    result.val_loss = result.evals.back().val_loss;
  }
  if (!worker_.is_root()) return;
  const uint64_t sample_seed = config_.seed + 1;
  for (const std::u32string& word :
       SampleWords(*model_, corpus_.vocab, config_.model.context, config_.samples, sample_seed,
                   worker_.device)) {
    result.samples.push_back(ToUtf8(word));
  }
}

}  // namespace

CharLmResult TrainCharLm(const CharLmConfig& config, std::ostream& log) {
  TANDEM_CHECK(config.batch_size >= 1) << "--batch_size must be at least 1, got "
                                       << config.batch_size;
  TANDEM_CHECK(config.steps >= 1 || config.epochs >= 1)
      << "--steps must be at least 1 (or --epochs), got " << config.steps;
  const Corpus corpus = LoadCorpus(config);
  std::mutex mutex;
  CharLmResult result;
  result.bigram_loss = corpus.bigram_loss;
  Launch(config.launch, [&](Worker& worker) {
    if (worker.is_root()) {
      log << "data: " << config.words_path << ": " << corpus.split.train.size() << " train / "
          << corpus.split.validation.size() << " validation words ("
          << corpus.train.size() << " / " << corpus.validation.size()
          << " characters with end tokens); vocabulary " << corpus.vocab.size() << " ("
          << corpus.vocab.chars().size() << " characters + end)\n";
    }
    CharLmResult mine;
    WorkerRun(config, corpus, worker, log).Run(mine);
    if (!worker.is_root()) {
      if (config.launch.mode == LaunchMode::kMpi) result.is_root = false;
      return;
    }
    std::lock_guard<std::mutex> lock(mutex);
    mine.bigram_loss = result.bigram_loss;
    mine.is_root = result.is_root;
    result = mine;
  });
  if (result.is_root) {
    log << "bigram baseline (add-one smoothing): val_loss " << Fixed(result.bigram_loss)
        << "; model: val_loss " << Fixed(result.val_loss) << " nats/char\n"
        << "samples:";
    for (const std::string& word : result.samples) log << " " << word;
    log << std::endl;
  }
  return result;
}

}  // namespace char_lm
}  // namespace tandem
