// How the Trainer (trainer/trainer.h) trains, and what it reports back.
// Every field is a command-line flag of the examples (trainer/flags.h adds
// them to a program's command line), named in the comments where the name
// differs.
#ifndef TANDEM_TRAINER_TRAIN_CONFIG_H_
#define TANDEM_TRAINER_TRAIN_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "layers/optimizer.h"
#include "layers/precision.h"
#include "parallel/launcher.h"

namespace tandem {

// A configuration the user has to change: a flag out of range, flags that
// contradict each other, a device or data file that is not there, a
// checkpoint saved by another run. The message names the flag and says what
// to do, with no source location (it is not a bug); the command line exits
// with status kUsageExitCode for it.
class UsageError : public Error {
 public:
  using Error::Error;
};

inline constexpr int kUsageExitCode = 2;

struct TrainConfig {
  // How long: `epochs` passes over the training set, or, when steps > 0,
  // exactly `steps` optimizer steps (the data order going on into further
  // epochs as needed). The learning-rate schedule spans the whole run.
  int epochs = 12;
  int64_t steps = 0;
  int64_t batch_size = 128;      // global: split across workers
  // Each worker's share of a batch in this many micro-batches, their
  // gradients accumulated locally (the reducer's sync off) and reduced once,
  // with the last: the step is the same as with one micro-batch, in less
  // memory.
  int accumulate = 1;
  OptimizerConfig optimizer;     // adamw, lr 1e-3 by default
  std::string lr_schedule = "cosine";  // "constant" or "cosine"
  int64_t warmup_steps = 0;      // --warmup: linear ramp of the learning rate
  // --clip_grad_norm: the gradient (all parameters together, after the
  // all-reduce) is scaled down to this L2 norm when it is longer (0: off).
  // Clipping needs the whole gradient's norm, so the optimizer then updates
  // after backward instead of bucket by bucket beside it.
  float clip_grad_norm = 0.f;
  // fp32, tf32 or bf16 (layers/precision.h): handed to the task's model.
  Precision precision = Precision::kFp32;
  // Gradients all-reduced as bfloat16, half the bytes, the result written
  // back into the float32 gradients (BFloat16CompressionHook).
  bool bf16_allreduce = false;
  // Sharded optimizer state (ZeRO-1, parallel/sharded_optimizer.h): each of
  // N workers keeps the optimizer state of 1/N of the parameters and
  // updates only those; the updated parameters are all-gathered after
  // backward. Not with bf16_allreduce. Checkpoints hold the whole state, as
  // an unsharded run's do.
  bool shard_optimizer = false;
  // --deterministic: final parameters bitwise the same for 1, 2, 4, ...
  // workers (threads or MPI, sharded or not) on the CPU. Each global batch
  // is cut into micro_shards pieces whatever the world size, each piece's
  // gradient is computed alone and the pieces are summed in one fixed tree
  // (Note [Deterministic sums] in parallel/deterministic_sum.cc).
  // micro_shards and the worker count are powers of two, the workers at
  // most micro_shards. Not with accumulate, bf16_allreduce or GPUs. The
  // CPU's intra-op threads (launch.cpu_threads) default to 1 per worker
  // then: runs agree bitwise when their --cpu_threads agree.
  bool deterministic = false;
  int micro_shards = 4;          // --micro_shards
  uint64_t seed = 42;            // initialisation, shuffling, dropout
  LaunchOptions launch;
  double bucket_mb = 4.0;
  bool overlap = true;           // --no_overlap turns it off
  // The next batch is gathered (and copied to the GPU) on a background
  // thread while the step runs (--no_prefetch: on the training thread).
  bool prefetch = true;
  // --eval_every: also evaluate every N steps (0: at each epoch's end only;
  // with steps > 0, at the end of the run only).
  int64_t eval_every = 0;
  bool quiet = false;
  // A NaN or infinite loss stops training, naming the step; with
  // skip_nonfinite such steps are skipped instead (this reads the loss every
  // step, which on a GPU costs a synchronisation per step).
  bool skip_nonfinite = false;
  // --metrics: JSON Lines per evaluation, appended to when the run resumes.
  std::string metrics_path;
  // --log_every: also a --metrics row every N steps (0: none): the step's
  // loss, learning rate, samples/s and gradient norm (step_log.h). Reading
  // them waits for the device, on those steps only.
  int64_t log_every = 0;
  // --plot: SVG of the loss and accuracy curves, redrawn at each
  // evaluation. A resumed run plots the evaluations before the checkpoint
  // from --metrics.
  std::string plot_path;
  std::string trace_path;        // --trace: Chrome trace of a few steps
  int trace_steps = 5;           // steps traced, from the second step on
  // --export_safetensors: rank 0 writes the final parameters there
  // (io/safetensors.h); empty: none.
  std::string export_safetensors;
  // Checkpoints: rank 0 saves checkpoint_dir/checkpoint.tnd every
  // checkpoint_every steps (0: never) and at every end but an error; resume
  // continues from it. See docs/reliability.md.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  int64_t max_steps = 0;         // stop after this many steps in all (0: no limit)
};

// One evaluation: at the end of each epoch, and every eval_every steps.
struct EvalStats {
  int epoch;                     // from 1: the epoch it ended or fell in
  int64_t step;                  // optimizer steps taken
  double loss;                   // mean training loss since the last evaluation
  double train_accuracy;         // over the examples trained since then
  double test_loss;
  double test_accuracy;
  double samples_per_second;
  double comm_wait_seconds;      // time backward waited for all-reduce
  int64_t skipped_steps;         // non-finite steps skipped (skip_nonfinite)
  double seconds;                // since training started
  // Bytes of optimizer state (momentum, Adam moments) each worker holds
  // (rank 0's): with shard_optimizer, about 1/N of the whole.
  int64_t optimizer_state_bytes = 0;
};

struct TrainResult {
  std::vector<EvalStats> evals;
  double test_accuracy = 0.0;    // the last evaluation's
  double test_loss = 0.0;
  double seconds = 0.0;
  std::vector<float> parameters;  // rank 0's final parameters, flattened
  bool is_root = true;            // false on MPI ranks other than 0
  // The signal that stopped the run early (trainer/stop_signal.h), 0 when
  // it ran to its end or to --max_steps.
  int stop_signal = 0;
};

}  // namespace tandem

#endif  // TANDEM_TRAINER_TRAIN_CONFIG_H_
