// One worker's part of Train (trainer/trainer.h): its model, reducer and
// optimizer, its steps, evaluations, checkpoints and reports. Internal to
// the trainer package.
#ifndef TANDEM_TRAINER_WORKER_RUN_H_
#define TANDEM_TRAINER_WORKER_RUN_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "data/prefetcher.h"
#include "layers/loss.h"
#include "layers/lr_schedule.h"
#include "layers/optimizer.h"
#include "layers/layer.h"
#include "parallel/launcher.h"
#include "parallel/deterministic_sum.h"
#include "parallel/reducer.h"
#include "parallel/sharded_optimizer.h"
#include "parallel/sharding.h"
#include "report/chrome_trace.h"
#include "report/progress.h"
#include "trainer/grad_clip.h"
#include "trainer/run_report.h"
#include "trainer/step_log.h"
#include "trainer/step_tracer.h"
#include "trainer/trainer.h"

namespace tandem {
namespace trainer_internal {

// What the workers of one process report to Train.
struct SharedResult {
  std::mutex mutex;
  TrainResult result;
};

class WorkerRun {
 public:
  WorkerRun(const TrainTask& task, const TrainConfig& config, Worker& worker, std::ostream& log,
            ChromeTrace* trace, SharedResult& shared);
  void Run();

 private:
  using Clock = std::chrono::steady_clock;
  // Running sums since the last evaluation; loss and accuracy on the device.
  struct Totals {
    int64_t steps = 0, skipped = 0, examples = 0;
    double comm_wait = 0.0;
    Clock::time_point start = Clock::now();
  };
  enum class EpochEnd { kNext, kFinished, kStopped };

  void BuildModel();
  // Without --shard_optimizer: the per-bucket update hook, or the clipper.
  void BuildUnshardedStep();
  void BuildTracing();
  bool Resume();
  void NoteCheckpointToReplace() const;
  void LogSetup() const;
  std::string Title() const;
  EpochEnd TrainEpoch(int epoch);
  // The epoch's batch order, at the checkpoint's batch when resumed.
  data::BatchIterator Batches(int epoch) const;
  data::PrefetchOptions PrefetchFor(int epoch);
  // One step on the next batch; false when it was skipped (non-finite loss).
  bool Step(const data::Batch& batch, int epoch);
  // This worker's micro-batches of a batch of `rows` (its share): rows
  // [begin, end) each, in order.
  std::vector<ShardRange> MicroBatches(int64_t global_rows, int64_t rows) const;
  // Forward and loss of rows [begin, end) of the batch (the accuracy count
  // into the epoch's sum); returns the micro-batch's loss.
  Tensor ForwardMicro(const data::Batch& batch, int64_t begin, int64_t end, bool traced);
  // The loss's backward through the reducer: the first micro-batch of a step
  // writes the gradients, later ones add to them.
  // `hooks`: a trace's, or null.
  void BackwardMicro(bool first, GradientSync sync, const LayerHooks* hooks = nullptr);
  void FinishStep(const Tensor& step_loss, int epoch, int64_t examples);
  bool StopAfterStep();
  bool SkipNonFinite(const Tensor& step_loss, int epoch);
  void CheckFinite(int epoch);
  bool RunFinished() const;
  void ShowProgress(ProgressBar& bar, int64_t done, int64_t num_batches);
  void EvaluateAndReport(int epoch, std::optional<ProgressBar>& bar);
  EvalStats Measure(int epoch);
  void Report(const EvalStats& stats, std::optional<ProgressBar>& bar);
  void Save(int64_t epoch, int64_t batch_in_epoch);
  struct TestFigures {
    double accuracy, loss;
  };
  TestFigures Evaluate();
  void Finish(bool stopped);

  const TrainTask& task_;
  const TrainConfig& config_;
  Worker& worker_;
  std::ostream& log_;
  ChromeTrace* trace_;
  SharedResult& shared_;
  const bool root_;
  // A live progress line: on an interactive terminal of a single process.
  const bool live_progress_;
  const Clock::time_point start_ = Clock::now();
  std::unique_ptr<Layer> model_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<GradClipper> clipper_;  // --clip_grad_norm, unsharded
  // --shard_optimizer: the reducer's hook, which updates this worker's
  // shards and counts the steps; null otherwise.
  ShardedOptimizerHook* sharded_ = nullptr;
  // --deterministic: the hook that sums the gradients in a fixed tree,
  // inside the update or sharded hook; null otherwise.
  DeterministicSumHook* tree_sum_ = nullptr;
  std::optional<StepTracer> tracer_;
  std::optional<StepLog> step_log_;  // --log_every
  std::optional<RunReport> report_;  // rank 0's
  const Objective& objective_;
  std::unique_ptr<Loss> loss_, test_loss_;
  std::vector<uint64_t> run_key_;
  int start_epoch_ = 0;
  int64_t start_batch_ = 0;
  int64_t global_step_ = 0;   // steps this run has taken, skipped ones too
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;   // the schedule's length
  int64_t last_eval_step_ = -1;
  bool evaluated_ = false;    // this run has reported an evaluation
  double running_loss_ = 0.0; // the progress line's, NaN until read
  int stop_signal_ = 0;       // the signal that stopped the run, 0 while none
  LrSchedule schedule_;
  Totals totals_;
  Tensor loss_sum_, correct_sum_, correct_;
  Tensor step_loss_;  // the micro-batches' loss sum, with --accumulate
  // The first step whose loss was not finite, -1 while none: see
  // ops::TrackNonFinite. Read every kCheckEvery steps, not every step.
  Tensor first_bad_;
  static constexpr int64_t kCheckEvery = 50;
};

}  // namespace trainer_internal
}  // namespace tandem

#endif  // TANDEM_TRAINER_WORKER_RUN_H_
