// RunReport (trainer/run_report.h): the metrics log and the
// plot of a fresh run and of a resumed one.
#include "trainer/run_report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "report/metrics_log.h"

namespace tandem {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Epoch `epoch` ends at step 10 * epoch.
EvalStats Stats(int epoch, double loss) {
  return {epoch, 10 * epoch, loss, 0.8, loss + 0.1, 0.75, 1000, 0.01, 0, 1.0};
}

TrainConfig Config(const std::string& name) {
  TrainConfig c;
  c.metrics_path = TempPath(name + ".jsonl");
  c.plot_path = TempPath(name + ".svg");
  return c;
}

TEST(RunReportTest, AFreshRunStartsTheLogAndPlotsTrainAndTestLoss) {
  const TrainConfig c = Config("fresh");
  { std::ofstream(c.metrics_path) << "{\"epoch\":1,\"split\":\"train\",\"loss\":9}\n"; }
  RunReport report(c, "Fashion-MNIST, MLP 784-16-10, 1 worker", std::nullopt);
  report.Eval(Stats(1, 0.6), 1e-3);
  report.Eval(Stats(2, 0.5), 1e-3);
  const std::vector<MetricsRow> rows = ReadMetricsLog(c.metrics_path);
  ASSERT_EQ(rows.size(), 4u);  // the old line is gone
  EXPECT_EQ(rows[1].String("split"), "test");
  EXPECT_DOUBLE_EQ(rows[1].Number("loss"), 0.7);  // test loss is logged
  EXPECT_EQ(report.plotted_evals(), 2);
  const std::string svg = Slurp(c.plot_path);
  // Both panels draw both series: train and test loss, train and test accuracy.
  EXPECT_EQ(Count(svg, "<g><title>train</title>"), 2);
  EXPECT_EQ(Count(svg, "<g><title>test</title>"), 2);
  EXPECT_NE(svg.find(">Fashion-MNIST, MLP 784-16-10, 1 worker</text>"), std::string::npos);
}

// Resumed at step 20, after two whole epochs: the log keeps its lines and
// grows; the plot shows epochs 1 and 2 from the log (the last row of a step
// winning, and an evaluation logged after the checkpoint left out), then
// what is trained.
TEST(RunReportTest, AResumedRunAppendsAndPlotsTheWholeRun) {
  const TrainConfig c = Config("resumed");
  const char* old_log =
      "{\"epoch\":1,\"step\":10,\"loss\":0.9,\"accuracy\":0.6,\"split\":\"train\"}\n"
      "{\"epoch\":1,\"step\":10,\"loss\":0.95,\"accuracy\":0.55,\"split\":\"test\"}\n"
      "{\"epoch\":2,\"step\":20,\"loss\":0.1,\"accuracy\":0.1,\"split\":\"train\"}\n"
      "{\"epoch\":2,\"step\":20,\"loss\":0.7,\"accuracy\":0.7,\"split\":\"train\"}\n"
      "{\"epoch\":2,\"step\":20,\"loss\":0.75,\"accuracy\":0.68,\"split\":\"test\"}\n"
      "{\"epoch\":3,\"step\":30,\"loss\":5,\"accuracy\":0,\"split\":\"train\"}\n";
  { std::ofstream(c.metrics_path) << old_log; }
  RunReport report(c, "t", /*resumed_at_step=*/20);
  EXPECT_EQ(report.plotted_evals(), 2);
  report.Eval(Stats(3, 0.5), 1e-3);
  EXPECT_EQ(report.plotted_evals(), 3);
  EXPECT_EQ(Slurp(c.metrics_path).rfind(old_log, 0), 0u);
  EXPECT_EQ(ReadMetricsLog(c.metrics_path).size(), 8u);
  const std::string svg = Slurp(c.plot_path);
  // 3 epochs x 4 series, and the legend's 2.
  EXPECT_EQ(Count(svg, "<circle"), 3 * 4 + 2);
}

// --log_every's rows: one JSON line per step, in a fixed format, which a
// resumed run's plot leaves out (they are not evaluations).
TEST(RunReportTest, StepRowsAreLoggedAndNotPlotted) {
  const TrainConfig c = Config("steps");
  {
    RunReport report(c, "t", std::nullopt);
    report.Step({10, 1, 0.5, 1e-3, 2000, 1.25});
    report.Eval(Stats(1, 0.6), 1e-3);
    report.Step({20, 2, 0.25, 5e-4, 2500, 0.5});
  }
  const std::string log = Slurp(c.metrics_path);
  EXPECT_EQ(log.substr(0, log.find('\n')),
            "{\"epoch\":1,\"step\":10,\"loss\":0.5,\"lr\":0.001,"
            "\"samples_per_second\":2000,\"grad_norm\":1.25,\"kind\":\"step\"}");
  EXPECT_EQ(Count(log, "\"kind\":\"step\""), 2);
  RunReport resumed(c, "t", /*resumed_at_step=*/10);
  EXPECT_EQ(resumed.plotted_evals(), 1);  // epoch 1 only, from its epoch rows
  resumed.Eval(Stats(2, 0.4), 1e-3);
  const std::string svg = Slurp(c.plot_path);
  EXPECT_EQ(Count(svg, "<circle"), 2 * 4 + 2);
}

TEST(RunReportTest, StepRowsNeedAMetricsFile) {
  TrainConfig c;
  RunReport report(c, "t", std::nullopt);
  report.Step({10, 1, 0.5, 1e-3, 2000, 1.25});  // nothing to write to: nothing happens
  EXPECT_EQ(report.plotted_evals(), 0);
}

}  // namespace
}  // namespace tandem
