// What a training run leaves for its user after each epoch: a train and a
// test line in the --metrics log, and the --plot redrawn from every epoch so
// far; with --log_every, a step line every N steps as well. A resumed run
// appends to its log and reads back the epochs before its checkpoint, so the
// plot shows the whole run, not just its last part.
//
//   RunReport report(config, "Fashion-MNIST, MLP 784-512-256-10, 2 workers",
//                    /*resumed_after=*/std::nullopt);   // a fresh run
//   report.Epoch(stats, optimizer.steps(), optimizer.lr());
//   report.Step(row);   // a StepRow (step_log.h), with --log_every
//
// Rank 0 owns one; other ranks report nothing.
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_RUN_REPORT_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_RUN_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "examples/fashion_mnist/step_log.h"
#include "examples/fashion_mnist/train.h"
#include "report/metrics_log.h"

namespace tandem {

class RunReport {
 public:
  // `resumed_after`: nullopt for a fresh run, which starts --metrics anew;
  // for a resumed run, the number of epochs the checkpoint had finished:
  // --metrics is appended to, and its rows of those epochs are read back
  // for the plot (the last row of an epoch wins: a run that crashed after
  // its last checkpoint may have logged an epoch that is now trained again).
  RunReport(const TrainConfig& config, std::string plot_title,
            std::optional<int> resumed_after);

  // Logs and plots one epoch; `step` and `lr` are the optimizer's after it.
  void Epoch(const EpochStats& stats, int64_t step, double lr);
  // Logs one step: {"epoch":..,"step":..,"loss":..,"lr":..,
  // "samples_per_second":..,"grad_norm":..,"kind":"step"}. Nothing without
  // --metrics.
  void Step(const StepRow& row);

  // Epochs the plot shows (read back and trained), for tests.
  int plotted_epochs() const { return static_cast<int>(epochs_.size()); }

 private:
  struct Figures {
    double train_loss, train_accuracy, test_loss, test_accuracy;
  };
  void ReadBack(int epochs);
  void Plot() const;

  const TrainConfig& config_;
  std::string title_;
  std::optional<MetricsLog> metrics_;
  std::map<int, Figures> epochs_;  // by epoch, from 1
};

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_RUN_REPORT_H_
