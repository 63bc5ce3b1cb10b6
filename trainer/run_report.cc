#include "trainer/run_report.h"

#include <cmath>
#include <utility>
#include <vector>

#include "report/svg_plot.h"

namespace tandem {

RunReport::RunReport(const TrainConfig& config, std::string plot_title,
                     std::optional<int64_t> resumed_at_step)
    : config_(config), title_(std::move(plot_title)),
      by_steps_(config.steps > 0 || config.eval_every > 0) {
  if (config.metrics_path.empty()) return;
  if (resumed_at_step && !config.plot_path.empty()) ReadBack(*resumed_at_step);
  metrics_.emplace(config.metrics_path, "--metrics",
                   resumed_at_step ? MetricsLog::OpenMode::kAppend
                                   : MetricsLog::OpenMode::kTruncate);
}

void RunReport::ReadBack(int64_t last_step) {
  const double nan = std::nan("");
  for (const MetricsRow& row : ReadMetricsLog(config_.metrics_path)) {
    const double step = row.Number("step");
    if (!(step >= 0 && step <= last_step) || step != std::floor(step)) continue;
    const std::string split = row.String("split");
    if (split != "train" && split != "test") continue;  // a step row (--log_every)
    const double epoch = row.Number("epoch");
    auto [it, added] = evals_.try_emplace(Key(static_cast<int>(epoch), static_cast<int64_t>(step)),
                                          Figures{epoch, nan, nan, nan, nan});
    if (split == "train") {
      it->second.train_loss = row.Number("loss");
      it->second.train_accuracy = row.Number("accuracy");
    } else if (split == "test") {
      it->second.test_loss = row.Number("loss");
      it->second.test_accuracy = row.Number("accuracy");
    }
  }
}

void RunReport::Eval(const EvalStats& stats, double lr) {
  if (metrics_) {
    const double e = stats.epoch;
    const double s = static_cast<double>(stats.step);
    const std::string precision = PrecisionName(config_.precision);
    metrics_->Write({{"epoch", e}, {"step", s}, {"loss", stats.loss},
                     {"accuracy", stats.train_accuracy},
                     {"samples_per_second", stats.samples_per_second},
                     {"comm_wait_seconds", stats.comm_wait_seconds},
                     {"lr", lr},
                     {"optimizer_state_bytes", static_cast<double>(stats.optimizer_state_bytes)}},
                    {{"split", "train"}, {"precision", precision}});
    metrics_->Write({{"epoch", e}, {"step", s}, {"loss", stats.test_loss},
                     {"accuracy", stats.test_accuracy}},
                    {{"split", "test"}, {"precision", precision}});
  }
  if (config_.plot_path.empty()) return;
  evals_[Key(stats.epoch, stats.step)] = {static_cast<double>(stats.epoch), stats.loss, stats.train_accuracy,
                        stats.test_loss, stats.test_accuracy};
  // Rewritten at every evaluation, so an interrupted run still has its plot.
  Plot();
}

void RunReport::Step(const StepRow& row) {
  if (!metrics_) return;
  metrics_->Write({{"epoch", static_cast<double>(row.epoch)},
                   {"step", static_cast<double>(row.step)},
                   {"loss", row.loss},
                   {"lr", row.lr},
                   {"samples_per_second", row.samples_per_second},
                   {"grad_norm", row.grad_norm}},
                  {{"kind", "step"}});
}

void RunReport::Plot() const {
  std::vector<double> x, train_loss, test_loss, train_accuracy, test_accuracy;
  for (const auto& [key, f] : evals_) {
    x.push_back(static_cast<double>(key));
    train_loss.push_back(f.train_loss);
    test_loss.push_back(f.test_loss);
    train_accuracy.push_back(f.train_accuracy);
    test_accuracy.push_back(f.test_accuracy);
  }
  PlotOptions options;
  if (by_steps_) options.loss_x_label = options.accuracy_x_label = "step";
  WritePlot(config_.plot_path, {{"train", x, train_loss}, {"test", x, test_loss}},
            {{"train", x, train_accuracy}, {"test", x, test_accuracy}}, title_, options);
}

}  // namespace tandem
