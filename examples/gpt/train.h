// The character-level GPT trained on a text corpus by the Trainer
// (trainer/trainer.h): the code behind `bazel run -c opt //examples:gpt`,
// in a library so tests drive the same run.
//
//   GptConfig config;                  // fortunes, 4 blocks of width 128, context 64
//   config.launch.workers = 2;         // 2 worker threads
//   GptResult result = TrainGpt(config, std::cout);
//   // result.val_loss (nats per byte), result.bigram_loss, result.sample
//
// The corpus's bytes are cut 90/10: the first 90% train, the rest validate.
// A training example is a window of context + 1 bytes starting anywhere in
// the training text (every start, shuffled by the Trainer): the model reads
// the first `context` and predicts the next byte at every position
// (NextToken()). The validation loss is measured on `val_windows` windows
// spread evenly over the validation text, the same ones at every
// evaluation, or on every non-overlapping window. Defaults follow nanoGPT's
// CPU "baby GPT": AdamW at 1e-3 with 100 warm-up steps and a cosine decay,
// weight decay 0.1, gradients clipped to norm 1, batch 12, 2000 steps.
#ifndef TANDEM_EXAMPLES_GPT_TRAIN_H_
#define TANDEM_EXAMPLES_GPT_TRAIN_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "examples/gpt/corpus.h"
#include "examples/gpt/model.h"
#include "trainer/train_config.h"

namespace tandem {
namespace gpt {

// The Trainer's configuration, with this model's defaults, plus the data,
// the model and the sampling.
struct GptConfig : TrainConfig {
  GptConfig();
  std::string corpus = kDefaultCorpus;  // a folder of text files, or one file
  // Validation windows evaluated, spread evenly over the validation text;
  // 0: every non-overlapping window (each validation byte predicted once).
  int64_t val_windows = 512;
  // vocab is set from the corpus; device and precision by the Trainer.
  ModelConfig model;
  int64_t sample_length = 500;  // bytes sampled at the end (rank 0); 0: none
  float temperature = 0.8f;     // 0: the most likely byte each time
  std::string prompt;           // "": start from a newline
};

struct GptResult {
  std::vector<EvalStats> evals;  // test_* figures are the validation windows'
  double train_loss = 0.0;       // the last evaluation's
  double val_loss = 0.0;
  double bigram_loss = 0.0;  // the add-one bigram's on the validation text
  double step_ms = 0.0;      // mean time of a training step (evaluations excluded)
  std::string sample;        // the prompt and the bytes drawn after it
  double seconds = 0.0;      // training, evaluations included
  bool is_root = true;       // false on MPI ranks other than 0
  int stop_signal = 0;       // as TrainResult's
};

// Loads the corpus, prints what it trains on, trains, and prints the bigram
// baseline and the sample (rank 0 only). Throws UsageError for a bad flag
// or a corpus that is not there, tandem::Error for one that cannot be read
// or is too short; with several workers, errors come as the launcher
// reports them.
GptResult TrainGpt(const GptConfig& config, std::ostream& log);

// The mean step time in milliseconds over the evaluations' intervals,
// each weighted by its steps: an interval's step time is batch_size /
// samples_per_second (which leaves evaluations out). 0 without evaluations.
double MeanStepMs(const std::vector<EvalStats>& evals, int64_t batch_size);

}  // namespace gpt
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_GPT_TRAIN_H_
