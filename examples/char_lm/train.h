// The character-level language model trained on a word list by the Trainer
// (trainer/trainer.h): the code behind `bazel run -c opt //examples:char_lm`,
// in a library so tests drive the same run.
//
//   CharLmConfig config;               // wamerican's word list, 2 blocks of 256
//   config.launch.workers = 2;         // 2 worker threads
//   CharLmResult result = TrainCharLm(config, std::cout);
//   // result.val_loss (nats per character), result.bigram_loss, result.samples
//
// The words are split 90/10 with a fixed seed (kSplitSeed), whatever --seed
// is, so runs with other seeds are measured on the same validation words.
// The training examples are every (context, next character) window of the
// training words, a data::TensorDataset the Trainer shuffles and shards; the
// learning rate warms up linearly over `warmup_steps` and decays along a
// cosine to 0 at the last step.
#ifndef TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_
#define TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "examples/char_lm/model.h"
#include "examples/char_lm/words.h"
#include "trainer/train_config.h"

namespace tandem {
namespace char_lm {

inline constexpr uint64_t kSplitSeed = 1;

// The Trainer's configuration, with this model's defaults, plus the data,
// the model and the sampling.
struct CharLmConfig : TrainConfig {
  CharLmConfig();
  std::string words_path = kDefaultWordList;
  // vocab is set from the word list; device and precision by the Trainer.
  ModelConfig model;
  int samples = 5;               // words sampled at the end (rank 0)
};

struct CharLmResult {
  std::vector<EvalStats> evals;   // test_* figures are the validation split's
  double train_loss = 0.0;        // the last evaluation's
  double val_loss = 0.0;
  double bigram_loss = 0.0;       // the add-one bigram's validation loss
  std::vector<std::string> samples;  // UTF-8
  double seconds = 0.0;           // training, evaluations included
  bool is_root = true;            // false on MPI ranks other than 0
  int stop_signal = 0;            // as TrainResult's
};

// Loads the word list, prints what it trains on, trains, and prints the
// bigram baseline and the sampled words (rank 0 only). Throws
// tandem::Error for a word list that cannot be read, UsageError for a bad
// flag; with several workers, errors come as the launcher reports them.
CharLmResult TrainCharLm(const CharLmConfig& config, std::ostream& log);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_
