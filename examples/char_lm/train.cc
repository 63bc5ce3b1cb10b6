#include "examples/char_lm/train.h"

#include <iomanip>
#include <mutex>
#include <sstream>

#include "core/check.h"
#include "data/dataset.h"
#include "examples/char_lm/sample.h"
#include "trainer/config_check.h"  // ReadableFileProblem
#include "trainer/trainer.h"

namespace tandem {
namespace char_lm {

CharLmConfig::CharLmConfig() {
  steps = 2500;
  batch_size = 512;
  optimizer.name = "adamw";
  optimizer.lr = 4e-3f;
  optimizer.weight_decay = 0.01f;
  lr_schedule = "cosine";
  warmup_steps = 100;
  eval_every = 500;
}

namespace {

// The words, split and windowed once, shared by every worker.
struct Corpus {
  Vocabulary vocab;
  WordSplit split;
  data::TensorDataset train, validation;
  double bigram_loss;
};

data::TensorDataset AsDataset(Windows windows, int64_t vocab, const std::string& name) {
  return data::TensorDataset(std::move(windows.contexts), std::move(windows.next), vocab, name);
}

Corpus LoadCorpus(const CharLmConfig& config) {
  CheckConfig(config);  // every flag before the words load (Train checks again)
  if (config.deterministic && config.model.dropout > 0) {
    throw UsageError("--dropout cannot be combined with --deterministic: each worker draws its own "
         "masks, so they would change with the number of workers");
  }
  // A word list that is not there, or not a file, is the user's setup: a
  // usage error (exit 2), as a missing data set is. Looked at, not opened
  // (a FIFO would block the open); one that is there but damaged fails the
  // run (exit 1).
  const std::string problem = ReadableFileProblem(config.words_path);
  if (!problem.empty()) {
    throw UsageError("the word list " + config.words_path + " " + problem +
                     ": install Debian's wamerican (tools/install_deps.sh does), or pass "
                     "--words=FILE with one word per line");
  }
  const std::vector<std::u32string> words = LoadWords(config.words_path);
  Corpus c;
  c.vocab = Vocabulary::FromWords(words);
  c.split = SplitWords(words, kSplitSeed);
  TANDEM_CHECK(!c.split.validation.empty())
      << "the word list " << config.words_path << " has too few words for a validation split ("
      << words.size() << " words)";
  const int64_t vocab = c.vocab.size();
  c.train = AsDataset(MakeWindows(c.split.train, c.vocab, config.model.context), vocab,
                      config.words_path + " (training words)");
  c.validation = AsDataset(MakeWindows(c.split.validation, c.vocab, config.model.context),
                           vocab, config.words_path + " (validation words)");
  c.bigram_loss = BigramLoss(c.split.train, c.split.validation, c.vocab);
  return c;
}

std::string Fixed(double value, int digits = 4) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string DescribeData(const CharLmConfig& config, const Corpus& corpus) {
  std::ostringstream log;
  log << "data: " << config.words_path << ": " << corpus.split.train.size() << " train / "
      << corpus.split.validation.size() << " validation words (" << corpus.train.size()
      << " / " << corpus.validation.size() << " characters with end tokens); vocabulary "
      << corpus.vocab.size() << " (" << corpus.vocab.chars().size() << " characters + end)";
  return log.str();
}

}  // namespace

CharLmResult TrainCharLm(const CharLmConfig& config, std::ostream& log) {
  const Corpus corpus = LoadCorpus(config);
  std::mutex mutex;
  CharLmResult result;
  result.bigram_loss = corpus.bigram_loss;
  TrainTask task;
  task.name = "char_lm";
  task.train = &corpus.train;
  task.test = &corpus.validation;
  task.test_name = "val";
  // The next character after each window: val_loss in nats per character.
  task.objective = NextToken();
  task.about_data = DescribeData(config, corpus);
  task.build_model = [&](const ModelContext& context) {
    ModelConfig model = config.model;
    model.vocab = corpus.vocab.size();
    model.device = context.device;
    model.precision = context.precision;
    // Each worker draws its own masks, over its own share of the batch.
    model.dropout_seed = context.seed + 1 + 1000 * context.rank;
    Rng rng(context.seed);
    return BuildCharLm(model, rng);
  };
  task.after_training = [&](Layer& model, const Worker& worker) {
    if (!worker.is_root()) return;
    std::vector<std::string> samples;
    for (const std::u32string& word : SampleWords(model, corpus.vocab, config.model.context,
                                                  config.samples, config.seed + 1,
                                                  worker.device)) {
      samples.push_back(ToUtf8(word));
    }
    std::lock_guard<std::mutex> lock(mutex);
    result.samples = std::move(samples);
  };
  const TrainResult trained = Train(task, config, log);
  result.is_root = trained.is_root;
  result.stop_signal = trained.stop_signal;
  result.evals = trained.evals;
  result.seconds = trained.seconds;
  result.val_loss = trained.test_loss;
  if (!trained.evals.empty()) result.train_loss = trained.evals.back().loss;
  if (result.is_root && !config.quiet && result.stop_signal == 0) {
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

