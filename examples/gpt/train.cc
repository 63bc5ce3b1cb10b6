#include "examples/gpt/train.h"

#include <iomanip>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/check.h"
#include "examples/gpt/sample.h"
#include "trainer/config_check.h"  // IsDirectory, ReadableFileProblem
#include "trainer/trainer.h"

namespace tandem {
namespace gpt {

GptConfig::GptConfig() {
  steps = 2000;
  batch_size = 12;
  optimizer.name = "adamw";
  optimizer.lr = 1e-3f;
  optimizer.weight_decay = 0.1f;
  lr_schedule = "cosine";
  warmup_steps = 100;
  clip_grad_norm = 1.f;
  eval_every = 500;
}

double MeanStepMs(const std::vector<EvalStats>& evals, int64_t batch_size) {
  double weighted = 0.0, steps = 0.0;
  int64_t previous = 0;
  for (const EvalStats& e : evals) {
    const double interval = static_cast<double>(e.step - previous);
    previous = e.step;
    if (interval <= 0 || e.samples_per_second <= 0) continue;
    weighted += interval * 1000.0 * static_cast<double>(batch_size) / e.samples_per_second;
    steps += interval;
  }
  return steps > 0 ? weighted / steps : 0.0;
}

namespace {

// The corpus, split and windowed once, shared by every worker.
struct Data {
  Corpus corpus;
  ByteVocabulary vocab;
  std::shared_ptr<const std::vector<uint8_t>> train_tokens, val_tokens;
  std::unique_ptr<WindowDataset> train, validation;
  double bigram_loss = 0.0;
};

Data LoadData(const GptConfig& config) {
  CheckConfig(config);  // every flag before the corpus loads (Train checks again)
  ModelConfig model = config.model;
  model.vocab = 1;  // known once the corpus is read
  CheckModelConfig(model);
  // A corpus that is not there is the user's setup: a usage error (exit 2),
  // as a missing data set is. One that is there but cannot be read fails
  // the run (exit 1).
  if (!IsDirectory(config.corpus)) {
    const std::string problem = ReadableFileProblem(config.corpus);
    if (!problem.empty()) {
      throw UsageError("the corpus " + config.corpus + " " + problem +
                       ": install Debian's fortunes (tools/install_deps.sh does), or pass "
                       "--corpus=DIR (its text files) or --corpus=FILE");
    }
  }
  Data d;
  d.corpus = LoadCorpus(config.corpus);
  d.vocab = ByteVocabulary::FromText(d.corpus.text);
  for (const char c : config.prompt) {
    if (!d.vocab.Contains(static_cast<uint8_t>(c))) {
      std::ostringstream hex;
      hex << std::hex << static_cast<int>(static_cast<uint8_t>(c));
      throw UsageError("--prompt holds the byte 0x" + hex.str() + ", which does not occur in " +
                       config.corpus + ": the model has no token for it");
    }
  }
  TokenSplit split = SplitTokens(d.vocab.Encode(d.corpus.text));
  d.bigram_loss = BigramLoss(split.train, split.validation, d.vocab.size());
  d.train_tokens = std::make_shared<const std::vector<uint8_t>>(std::move(split.train));
  d.val_tokens = std::make_shared<const std::vector<uint8_t>>(std::move(split.validation));
  const int64_t context = config.model.context;
  d.train = std::make_unique<WindowDataset>(d.train_tokens, context, d.vocab.size(),
                                            config.corpus + " (training text)");
  const std::string val_name = config.corpus + " (validation text)";
  d.validation = std::make_unique<WindowDataset>(
      config.val_windows > 0
          ? WindowDataset::Spread(d.val_tokens, context, d.vocab.size(), val_name,
                                  config.val_windows)
          : WindowDataset(d.val_tokens, context, d.vocab.size(), val_name, context));
  return d;
}

std::string Fixed(double value, int digits = 4) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string DescribeData(const GptConfig& config, const Data& d) {
  std::ostringstream log;
  log << "data: " << config.corpus << ": " << d.corpus.listing.files.size() << " file(s), "
      << d.corpus.text.size() << " bytes";
  if (!d.corpus.listing.skipped.empty()) {
    log << " (" << d.corpus.listing.skipped.size() << " entries skipped: .dat, .u8, links)";
  }
  log << "; " << d.train_tokens->size() << " train / " << d.val_tokens->size()
      << " validation bytes; vocabulary " << d.vocab.size() << " bytes; " << d.train->size()
      << " training windows of " << config.model.context << "+1; validation on "
      << d.validation->size() << " windows";
  return log.str();
}

}  // namespace

GptResult TrainGpt(const GptConfig& config, std::ostream& log) {
  const Data d = LoadData(config);
  std::mutex mutex;
  GptResult result;
  result.bigram_loss = d.bigram_loss;
  TrainTask task;
  task.name = "gpt";
  task.train = d.train.get();
  task.test = d.validation.get();
  task.test_name = "val";
  // The next byte at every position of a window: nats per byte.
  task.objective = NextToken();
  task.about_data = DescribeData(config, d);
  task.build_model = [&](const ModelContext& context) {
    ModelConfig model = config.model;
    model.vocab = d.vocab.size();
    model.device = context.device;
    model.precision = context.precision;
    Rng rng(context.seed);
    return BuildGpt(model, rng);
  };
  task.after_training = [&](Layer& model, const Worker& worker) {
    if (!worker.is_root() || config.sample_length == 0) return;
    std::string sample =
        SampleText(model, d.vocab, config.model.context, config.prompt, config.sample_length,
                   config.temperature, config.seed + 1, worker.device);
    std::lock_guard<std::mutex> lock(mutex);
    result.sample = std::move(sample);
  };
  const TrainResult trained = Train(task, config, log);
  result.is_root = trained.is_root;
  result.stop_signal = trained.stop_signal;
  result.evals = trained.evals;
  result.seconds = trained.seconds;
  result.val_loss = trained.test_loss;
  result.step_ms = MeanStepMs(trained.evals, config.batch_size);
  if (!trained.evals.empty()) result.train_loss = trained.evals.back().loss;
  if (result.is_root && !config.quiet && result.stop_signal == 0) {
    log << "bigram baseline (add-one smoothing): val_loss " << Fixed(result.bigram_loss)
        << "; model: val_loss " << Fixed(result.val_loss) << " nats/char\n";
    if (config.sample_length > 0) {
      log << "sample (temperature " << config.temperature << "):\n"
          << result.sample << "\n--- end of sample" << std::endl;
    }
  }
  return result;
}

}  // namespace gpt
}  // namespace tandem
