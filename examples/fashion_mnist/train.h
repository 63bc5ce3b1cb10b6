// Data-parallel training of an MLP on Fashion-MNIST: the code behind
// `bazel run -c opt //examples:fashion_mnist`, kept in a library so tests and
// benchmarks drive the same loop.
//
//   TrainConfig config;
//   config.launch.mode = LaunchMode::kThreads;
//   config.launch.workers = 2;
//   TrainResult result = TrainFashionMnist(config, std::cout);
//   // result.test_accuracy
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/check.h"
#include "layers/optimizer.h"
#include "layers/precision.h"
#include "parallel/launcher.h"

namespace tandem {

// A configuration the user has to change: a flag out of range, flags that
// contradict each other, a device or data directory that is not there, a
// checkpoint saved by another run. The message names the flag and says what
// to do, with no source location (it is not a bug); the command line exits
// with status 2 for it.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct TrainConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 12;
  int64_t batch_size = 128;      // global: split across workers
  std::vector<int64_t> hidden = {512, 256};
  std::string activation = "relu";
  // fp32, tf32 or bf16 (layers/precision.h).
  Precision precision = Precision::kFp32;
  // Gradients all-reduced as bfloat16, half the bytes, the result written
  // back into the float32 gradients (BFloat16CompressionHook).
  bool bf16_allreduce = false;
  float dropout = 0.f;
  OptimizerConfig optimizer;     // adamw, lr 1e-3 by default
  std::string lr_schedule = "cosine";
  uint64_t seed = 42;
  LaunchOptions launch;
  double bucket_mb = 4.0;
  bool overlap = true;
  int64_t max_train = -1;        // use only the first N examples (smoke tests)
  int64_t max_test = -1;
  bool quiet = false;
  // A NaN or infinite loss stops training, naming the step; with
  // skip_nonfinite such steps are skipped instead (this reads the loss every
  // step, which on a GPU costs a synchronisation per step).
  bool skip_nonfinite = false;
  // --metrics: JSON Lines per epoch, appended to when the run resumes.
  std::string metrics_path;
  // --log_every: also a --metrics row every N steps (0: none): the step's
  // loss, learning rate, samples/s and gradient norm (step_log.h). Reading
  // them waits for the device, on those steps only.
  int64_t log_every = 0;
  // --plot: SVG of the loss and accuracy curves, redrawn every epoch. A
  // resumed run plots the epochs before the checkpoint from --metrics.
  std::string plot_path;
  std::string trace_path;        // --trace: Chrome trace of a few steps
  int trace_steps = 5;           // steps traced, from the second step on
  // --export_safetensors: rank 0 writes the final parameters there (float32
  // safetensors, PyTorch's nn.Linear layout; io/safetensors.h); empty: none.
  std::string export_safetensors;
  // Checkpoints: rank 0 saves checkpoint_dir/checkpoint.tnd every
  // checkpoint_every steps (0: never) and at the end; resume continues from
  // it. See docs/reliability.md.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  int64_t max_steps = 0;         // stop after this many steps in all (0: no limit)
};

struct EpochStats {
  int epoch;
  double loss;
  double train_accuracy;
  double test_loss;
  double test_accuracy;
  double samples_per_second;
  double comm_wait_seconds;      // time backward waited for all-reduce
  int64_t skipped_steps;         // non-finite steps skipped (skip_nonfinite)
};

struct TrainResult {
  std::vector<EpochStats> epochs;
  double test_accuracy = 0.0;
  double seconds = 0.0;
  std::vector<float> parameters;  // rank 0's final parameters, flattened
  bool is_root = true;            // false on MPI ranks other than 0
  // The signal that stopped the run early (trainer/stop_signal.h), 0 when
  // it ran to its end or to --max_steps.
  int stop_signal = 0;
};

// Validates the configuration (throwing UsageError, which names the flag),
// loads the data and trains; progress goes to `log` from rank 0 only: a
// live line on an interactive terminal of a single process, else one line
// per epoch. A lone worker's error (threads mode, one worker) is thrown as
// it is; with several, as the launcher reports it ("worker <rank> failed:
// ...", parallel/launcher.h). With StopSignals installed (main does), a
// signal stops every worker after the same step; with --checkpoint_dir the
// run saves there when it ends in any way but an error (its last epoch,
// --max_steps or a signal).
TrainResult TrainFashionMnist(const TrainConfig& config, std::ostream& log);

// Parses "512,256" (the --hidden flag); "" means no hidden layer. Throws
// UsageError for anything else.
std::vector<int64_t> ParseSizes(const std::string& text);

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_
