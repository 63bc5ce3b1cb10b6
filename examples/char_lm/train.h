// Data-parallel training of the character-level language model on a word
// list: the code behind `bazel run -c opt //examples:char_lm`, in a library
// so tests drive the same loop.
//
//   CharLmConfig config;               // wamerican's word list, 2 blocks of 256
//   config.launch.workers = 2;         // 2 worker threads
//   CharLmResult result = TrainCharLm(config, std::cout);
//   // result.val_loss (nats per character), result.bigram_loss, result.samples
//
// The words are split 90/10 with a fixed seed (kSplitSeed), whatever --seed
// is, so runs with other seeds are measured on the same validation words.
// Each step draws a global batch of (context, next) examples from a
// per-epoch shuffle, each worker takes its shard, and the reducer averages
// the gradients (parallel/reducer.h) while AdamW updates each bucket as it
// arrives. The learning rate warms up linearly over `warmup` steps and
// decays along a cosine to 0 at the last step.
#ifndef TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_
#define TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "examples/char_lm/model.h"
#include "examples/char_lm/words.h"
#include "parallel/launcher.h"

namespace tandem {
namespace char_lm {

inline constexpr uint64_t kSplitSeed = 1;

struct CharLmConfig {
  std::string words_path = kDefaultWordList;
  // vocab is set from the word list; device from launch.device.
  ModelConfig model;
  int64_t steps = 2500;          // optimizer steps in all
  int epochs = 0;                // when > 0: this many passes instead of `steps`
  int64_t batch_size = 512;      // global: split across workers
  float lr = 4e-3f;              // the peak learning rate
  float weight_decay = 0.01f;    // AdamW's decoupled weight decay
  int64_t warmup = 100;          // steps of linear warm-up
  int64_t eval_every = 500;      // steps between validation lines (0: at the end only)
  uint64_t seed = 42;            // initialisation, shuffling, sampling
  int samples = 5;               // words sampled at the end (rank 0)
  LaunchOptions launch;
};

// One progress line: the mean training loss over the steps since the last
// line, and the loss on the whole validation split, both in nats/char.
struct EvalRow {
  int64_t step;
  double train_loss;
  double val_loss;
  double seconds;  // since training started
};

struct CharLmResult {
  std::vector<EvalRow> evals;
  double train_loss = 0.0;
  double val_loss = 0.0;
  double bigram_loss = 0.0;       // the add-one bigram's validation loss
  std::vector<std::string> samples;  // UTF-8
  double seconds = 0.0;           // training, evaluations included
  bool is_root = true;            // false on MPI ranks other than 0
};

// Loads the word list, prints what it trains on, trains, and prints a line
// per evaluation, the bigram baseline and the sampled words (rank 0 only).
// Throws tandem::Error for a word list that cannot be read or a bad size;
// with several workers, errors come as the launcher reports them.
CharLmResult TrainCharLm(const CharLmConfig& config, std::ostream& log);

// The learning rate at `step` (0-based) of `total`: lr * min(1, (step+1) /
// warmup) * (1 + cos(pi * step / total)) / 2.
float WarmupCosineLr(float lr, int64_t step, int64_t total, int64_t warmup);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_TRAIN_H_
