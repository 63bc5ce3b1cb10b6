// What a training run leaves for its user after each evaluation: a train
// and a test line in the --metrics log, and the --plot redrawn from every
// evaluation so far (against epochs, or against steps when the run
// evaluates by steps); with --log_every, a step line every N steps as well.
// A resumed run appends to its log and reads back the evaluations before its
// checkpoint, so the plot shows the whole run, not just its last part.
//
//   RunReport report(config, "Fashion-MNIST, MLP 784-512-256-10, 2 workers",
//                    /*resumed_at_step=*/std::nullopt);   // a fresh run
//   report.Eval(stats, optimizer.lr());
//   report.Step(row);   // a StepRow (step_log.h), with --log_every
//
// Rank 0 owns one; other ranks report nothing.
#ifndef TANDEM_TRAINER_RUN_REPORT_H_
#define TANDEM_TRAINER_RUN_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "trainer/step_log.h"
#include "trainer/train_config.h"
#include "report/metrics_log.h"

namespace tandem {

class RunReport {
 public:
  // `resumed_at_step`: nullopt for a fresh run, which starts --metrics anew;
  // for a resumed run, the optimizer step of its checkpoint: --metrics is
  // appended to, and its evaluations up to that step are read back for the
  // plot (the last row of a step wins: a run that crashed after its last
  // checkpoint may have logged an evaluation that is now made again; by
  // epochs, the last row of an epoch wins).
  RunReport(const TrainConfig& config, std::string plot_title,
            std::optional<int64_t> resumed_at_step);

  // Logs and plots one evaluation; `lr` is the optimizer's after it. The
  // train row carries the optimizer state each worker holds
  // ("optimizer_state_bytes": about 1/N of it with --shard_optimizer).
  void Eval(const EvalStats& stats, double lr);
  // Logs one step: {"epoch":..,"step":..,"loss":..,"lr":..,
  // "samples_per_second":..,"grad_norm":..,"kind":"step"}. Nothing without
  // --metrics.
  void Step(const StepRow& row);

  // Evaluations the plot shows (read back and made), for tests.
  int plotted_evals() const { return static_cast<int>(evals_.size()); }

 private:
  struct Figures {
    double epoch, train_loss, train_accuracy, test_loss, test_accuracy;
  };
  void ReadBack(int64_t last_step);
  // Where an evaluation goes on the plot's x axis, one point each: its step
  // when the run evaluates by steps, else its epoch (the last evaluation of
  // an epoch, e.g. after one stopped part-way and resumed, wins).
  int64_t Key(int epoch, int64_t step) const { return by_steps_ ? step : epoch; }
  void Plot() const;

  const TrainConfig& config_;
  std::string title_;
  std::optional<MetricsLog> metrics_;
  std::map<int64_t, Figures> evals_;  // by Key
  const bool by_steps_;               // the plot's x axis: steps, not epochs
};

}  // namespace tandem

#endif  // TANDEM_TRAINER_RUN_REPORT_H_
