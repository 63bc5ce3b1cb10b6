#include "examples/fashion_mnist/run_report.h"

#include <cmath>
#include <utility>
#include <vector>

#include "report/svg_plot.h"

namespace tandem {

RunReport::RunReport(const TrainConfig& config, std::string plot_title,
                     std::optional<int> resumed_after)
    : config_(config), title_(std::move(plot_title)) {
  if (config.metrics_path.empty()) return;
  if (resumed_after && !config.plot_path.empty()) ReadBack(*resumed_after);
  metrics_.emplace(config.metrics_path, "--metrics",
                   resumed_after ? MetricsLog::OpenMode::kAppend
                                 : MetricsLog::OpenMode::kTruncate);
}

void RunReport::ReadBack(int epochs) {
  const double nan = std::nan("");
  for (const MetricsRow& row : ReadMetricsLog(config_.metrics_path)) {
    const double epoch = row.Number("epoch");
    if (!(epoch >= 1 && epoch <= epochs) || epoch != std::floor(epoch)) continue;
    const std::string split = row.String("split");
    if (split != "train" && split != "test") continue;  // a step row (--log_every)
    auto [it, added] = epochs_.try_emplace(static_cast<int>(epoch), Figures{nan, nan, nan, nan});
    if (split == "train") {
      it->second.train_loss = row.Number("loss");
      it->second.train_accuracy = row.Number("accuracy");
    } else if (split == "test") {
      it->second.test_loss = row.Number("loss");
      it->second.test_accuracy = row.Number("accuracy");
    }
  }
}

void RunReport::Epoch(const EpochStats& stats, int64_t step, double lr) {
  if (metrics_) {
    const double e = stats.epoch;
    const double s = static_cast<double>(step);
    const std::string precision = PrecisionName(config_.precision);
    metrics_->Write({{"epoch", e}, {"step", s}, {"loss", stats.loss},
                     {"accuracy", stats.train_accuracy},
                     {"samples_per_second", stats.samples_per_second},
                     {"comm_wait_seconds", stats.comm_wait_seconds},
                     {"lr", lr}},
                    {{"split", "train"}, {"precision", precision}});
    metrics_->Write({{"epoch", e}, {"step", s}, {"loss", stats.test_loss},
                     {"accuracy", stats.test_accuracy}},
                    {{"split", "test"}, {"precision", precision}});
  }
  if (config_.plot_path.empty()) return;
  epochs_[stats.epoch] = {stats.loss, stats.train_accuracy, stats.test_loss,
                          stats.test_accuracy};
  // Rewritten every epoch, so an interrupted run still has its plot.
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
  for (const auto& [epoch, f] : epochs_) {
    x.push_back(epoch);
    train_loss.push_back(f.train_loss);
    test_loss.push_back(f.test_loss);
    train_accuracy.push_back(f.train_accuracy);
    test_accuracy.push_back(f.test_accuracy);
  }
  WritePlot(config_.plot_path, {{"train", x, train_loss}, {"test", x, test_loss}},
            {{"train", x, train_accuracy}, {"test", x, test_accuracy}}, title_);
}

}  // namespace tandem
