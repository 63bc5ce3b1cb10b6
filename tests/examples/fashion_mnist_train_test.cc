// Smoke test of the example's training loop on a subset of Fashion-MNIST,
// through the same library the binary uses.
#include "examples/fashion_mnist/train.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/profile_range.h"
#include "report/metrics_log.h"

namespace tandem {
namespace {

bool HaveData() {
  return std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").good();
}

FashionMnistConfig Small() {
  FashionMnistConfig c;
  c.epochs = 2;
  c.max_train = 3000;
  c.max_test = 1000;
  c.hidden = {64};
  c.batch_size = 50;
  c.quiet = true;
  return c;
}

TEST(FashionMnistTrainTest, LearnsOnASubsetWithTwoWorkers) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.launch.workers = 2;
  std::ostringstream log;
  const TrainResult r = TrainFashionMnist(c, log);
  ASSERT_EQ(r.evals.size(), 2u);
  std::cout << "subset test accuracy " << r.test_accuracy << "\n";
  EXPECT_GT(r.test_accuracy, 0.7);
  EXPECT_LT(r.evals[1].loss, r.evals[0].loss);
  // The test loss is measured too: below chance's log(10) and falling.
  EXPECT_TRUE(std::isfinite(r.evals[0].test_loss));
  EXPECT_LT(r.evals[0].test_loss, std::log(10.0));
  EXPECT_LT(r.evals[1].test_loss, r.evals[0].test_loss);
}

TEST(FashionMnistTrainTest, WorkerCountDoesNotChangeTheResult) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.epochs = 1;
  c.max_train = 600;
  std::ostringstream log;
  const TrainResult one = TrainFashionMnist(c, log);
  c.launch.workers = 3;
  const TrainResult three = TrainFashionMnist(c, log);
  ASSERT_EQ(one.parameters.size(), three.parameters.size());
  double worst = 0;
  for (size_t i = 0; i < one.parameters.size(); ++i) {
    worst = std::max(worst, std::abs(double(one.parameters[i]) - three.parameters[i]));
  }
  std::cout << "max |1 worker - 3 workers| after an epoch: " << worst << "\n";
  EXPECT_LT(worst, 1e-4);
}

// --log_every: step rows whose loss and gradient norm describe the global
// batch, so any worker count logs the same figures; the epoch's loss is the
// mean of its steps' losses.
std::vector<MetricsRow> StepRows(const std::string& path) {
  std::vector<MetricsRow> steps;
  for (MetricsRow& row : ReadMetricsLog(path)) {
    if (row.String("kind") == "step") steps.push_back(std::move(row));
  }
  return steps;
}

TEST(FashionMnistTrainTest, StepRowsDescribeTheGlobalBatchForAnyWorkerCount) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.epochs = 1;
  c.max_train = 600;
  c.max_steps = 6;
  c.log_every = 2;
  const std::string dir = std::string(getenv("TEST_TMPDIR"));
  c.metrics_path = dir + "/steps_one.jsonl";
  std::ostringstream log;
  TrainFashionMnist(c, log);
  c.launch.workers = 3;
  c.metrics_path = dir + "/steps_three.jsonl";
  TrainFashionMnist(c, log);
  const std::vector<MetricsRow> one = StepRows(dir + "/steps_one.jsonl");
  const std::vector<MetricsRow> three = StepRows(dir + "/steps_three.jsonl");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(three.size(), 3u);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].Number("step"), 2.0 * (i + 1));
    EXPECT_EQ(one[i].Number("epoch"), 1.0);
    EXPECT_EQ(three[i].Number("step"), one[i].Number("step"));
    EXPECT_EQ(three[i].Number("lr"), one[i].Number("lr"));
    EXPECT_NEAR(three[i].Number("loss"), one[i].Number("loss"), 1e-5);
    EXPECT_NEAR(three[i].Number("grad_norm"), one[i].Number("grad_norm"),
                1e-4 * one[i].Number("grad_norm"));
    EXPECT_GT(one[i].Number("grad_norm"), 0.0);
    EXPECT_GT(one[i].Number("samples_per_second"), 0.0);
  }
  EXPECT_LT(one.back().Number("loss"), one.front().Number("loss"));
  // Every step logged: their mean is the epoch row's training loss.
  c.log_every = 1;
  c.launch.workers = 2;
  c.metrics_path = dir + "/steps_all.jsonl";
  TrainFashionMnist(c, log);
  double sum = 0;
  const std::vector<MetricsRow> all = StepRows(c.metrics_path);
  ASSERT_EQ(all.size(), 6u);
  for (const MetricsRow& row : all) sum += row.Number("loss");
  double epoch_loss = NAN;
  for (const MetricsRow& row : ReadMetricsLog(c.metrics_path)) {
    if (row.String("split") == "train") epoch_loss = row.Number("loss");
  }
  EXPECT_NEAR(sum / all.size(), epoch_loss, 1e-6);
}

// The profiler ranges of one step (core/profile_range.h, seen through its
// test listener): on each worker thread, the step holds the layers' forward
// and backward, the loss, the bucket all-reduces (inside the backward of the
// layer that completed the bucket) and the optimizer's updates, every range
// closed in the order opened.
TEST(FashionMnistTrainTest, AStepEmitsNestedProfileRanges) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.epochs = 1;
  c.max_train = 200;
  c.max_steps = 1;
  c.launch.workers = 2;
  std::mutex mutex;
  std::map<std::thread::id, std::vector<std::string>> open, seen;
  std::vector<std::string> errors;
  SetProfileRangeListenerForTesting([&](const char* name, bool push) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string>& stack = open[std::this_thread::get_id()];
    if (push) {
      const std::string path = (stack.empty() ? "" : stack.back() + " > ") + name;
      stack.push_back(path);
      seen[std::this_thread::get_id()].push_back(path);
    } else if (stack.empty() || stack.back().size() < std::strlen(name) ||
               stack.back().compare(stack.back().size() - std::strlen(name), std::string::npos,
                                    name) != 0) {
      errors.push_back(std::string("ended '") + name + "' out of order");
    } else {
      stack.pop_back();
    }
  });
  std::ostringstream log;
  TrainFashionMnist(c, log);
  SetProfileRangeListenerForTesting(nullptr);
  EXPECT_TRUE(errors.empty()) << errors.front();
  int workers = 0;
  for (const auto& [thread, paths] : seen) {
    EXPECT_TRUE(open[thread].empty()) << open[thread].back() << " never ended";
    if (std::find(paths.begin(), paths.end(), "step 1") == paths.end()) continue;
    ++workers;
    for (const char* expected :
         {"step 1 > forward fc1", "step 1 > forward fc2", "step 1 > loss",
          "step 1 > backward fc2", "step 1 > backward fc1",
          "step 1 > wait for reductions and updates"}) {
      EXPECT_NE(std::find(paths.begin(), paths.end(), expected), paths.end()) << expected;
    }
    // One bucket (the model is small): its all-reduce starts inside fc1's
    // backward, which completes it, and AdamW updates it after the reduction.
    int reduces = 0, updates = 0;
    for (const std::string& p : paths) {
      reduces += p.rfind("step 1 > backward fc1 > all-reduce bucket 0 (", 0) == 0;
      updates += p.find("after all-reduce bucket 0 > AdamW update") != std::string::npos;
    }
    EXPECT_EQ(reduces, 1);
    EXPECT_EQ(updates, 1);
  }
  EXPECT_EQ(workers, 2);
}

// Interrupt a run at step 7 (checkpoint there), resume it, and compare with
// a run that was never interrupted: bitwise equal (CPU, threads mode).
TrainResult Interrupted(FashionMnistConfig c, const std::string& dir, int resume_workers) {
  std::ostringstream log;
  c.checkpoint_dir = dir;
  c.checkpoint_every = 7;
  c.max_steps = 7;
  TrainFashionMnist(c, log);
  c.max_steps = 0;
  c.resume = true;
  c.quiet = false;  // for the "resumed from" line
  c.launch.workers = resume_workers;
  const TrainResult r = TrainFashionMnist(c, log);
  EXPECT_NE(log.str().find("resumed from " + dir + "/checkpoint.tnd at step 7"),
            std::string::npos)
      << log.str();
  return r;
}

TEST(FashionMnistTrainTest, ResumeIsBitwiseEqualToAnUninterruptedRun) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.max_train = 600;   // 12 steps an epoch at batch 50
  c.launch.workers = 2;
  std::ostringstream log;
  const TrainResult whole = TrainFashionMnist(c, log);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/resume_same";
  const TrainResult resumed = Interrupted(c, dir, 2);
  ASSERT_EQ(whole.parameters.size(), resumed.parameters.size());
  EXPECT_EQ(0, std::memcmp(whole.parameters.data(), resumed.parameters.data(),
                           whole.parameters.size() * sizeof(float)));
}

TEST(FashionMnistTrainTest, ResumeWithAnotherWorkerCount) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.max_train = 600;
  c.launch.workers = 2;
  std::ostringstream log;
  const TrainResult whole = TrainFashionMnist(c, log);
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/resume_other";
  const TrainResult resumed = Interrupted(c, dir, 3);
  double worst = 0;
  for (size_t i = 0; i < whole.parameters.size(); ++i) {
    worst = std::max(worst, std::abs(double(whole.parameters[i]) - resumed.parameters[i]));
  }
  std::cout << "2 workers, resumed on 3: max |difference| " << worst << "\n";
  EXPECT_LT(worst, 1e-4);
}

// `--resume` after the last epoch trains nothing and reports the restored
// model's test accuracy: the saving run's, not 0.
TEST(FashionMnistTrainTest, ResumingAFinishedRunReportsItsAccuracy) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.max_train = 600;
  c.epochs = 1;
  c.checkpoint_dir = std::string(getenv("TEST_TMPDIR")) + "/resume_finished";
  std::ostringstream log;
  const TrainResult whole = TrainFashionMnist(c, log);
  c.resume = true;
  c.launch.workers = 2;
  const TrainResult resumed = TrainFashionMnist(c, log);
  EXPECT_TRUE(resumed.evals.empty());
  EXPECT_GT(whole.test_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(resumed.test_accuracy, whole.test_accuracy);
}

// Errors for users name the flag and carry no source location
// ("[cond at file.cc:12]" is for bugs).
bool HasSourceLocation(const std::string& message) {
  return std::regex_search(message, std::regex(R"( at [A-Za-z0-9_/.]+\.(cc|h):[0-9]+\])"));
}

std::string ErrorOf(FashionMnistConfig c) {
  try {
    std::ostringstream log;
    TrainFashionMnist(c, log);
  } catch (const UsageError& e) {
    EXPECT_FALSE(HasSourceLocation(e.what())) << e.what();
    return e.what();
  } catch (const Error& e) {
    return std::string("<not a usage error> ") + e.what();
  }
  return "<no error>";
}

TEST(FashionMnistTrainTest, ResumeRefusesAnotherRunsCheckpoint) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.max_train = 600;
  c.epochs = 1;
  c.checkpoint_dir = std::string(getenv("TEST_TMPDIR")) + "/resume_refuse";
  std::ostringstream log;
  TrainFashionMnist(c, log);
  c.resume = true;
  c.batch_size = 60;
  // A usage error, the same for one worker and for several (no
  // "worker 0 failed:" in front), naming what differs.
  for (const int workers : {1, 2}) {
    c.launch.workers = workers;
    const std::string error = ErrorOf(c);
    EXPECT_EQ(error.rfind(c.checkpoint_dir + "/checkpoint.tnd was saved by another run "
                          "(--batch_size: 50 there, 60 here)", 0), 0u)
        << error;
  }
}

// An error inside the one worker of a run is the run's error as it is; with
// several workers the launcher names the worker that failed.
TEST(FashionMnistTrainTest, ALoneWorkersErrorIsNotPrefixed) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  FashionMnistConfig c = Small();
  c.max_train = 600;
  c.epochs = 1;
  c.checkpoint_dir = std::string(getenv("TEST_TMPDIR")) + "/resume_other_model";
  std::ostringstream log;
  TrainFashionMnist(c, log);
  c.resume = true;
  c.hidden = {32};  // the checkpoint holds a 64-unit layer
  std::string lone, two;
  try {
    TrainFashionMnist(c, log);
  } catch (const Error& e) {
    lone = e.what();
  }
  c.launch.workers = 2;
  try {
    TrainFashionMnist(c, log);
  } catch (const Error& e) {
    two = e.what();
  }
  EXPECT_NE(lone.find("fc1.weight"), std::string::npos) << lone;
  EXPECT_EQ(lone.find("failed: "), std::string::npos) << lone;
  EXPECT_TRUE(std::regex_search(two, std::regex("^worker [01] failed: "))) << two;
}

TEST(FashionMnistTrainTest, BadConfigurationNamesTheFlag) {
  FashionMnistConfig c = Small();
  c.epochs = 0;
  EXPECT_EQ(ErrorOf(c), "--epochs must be in [1, 1000000000], got 0");
  c = Small();
  c.launch.workers = 4;
  c.batch_size = 3;
  EXPECT_NE(ErrorOf(c).find("--batch_size=3 is smaller than --workers=4"), std::string::npos);
  c = Small();
  c.data_dir = "/nonexistent";
  EXPECT_NE(ErrorOf(c).find("dataset-fashion-mnist"), std::string::npos) << ErrorOf(c);
  c = Small();
  c.optimizer.name = "adagrad";
  EXPECT_NE(ErrorOf(c).find("--optimizer"), std::string::npos);
  c = Small();
  c.resume = true;
  EXPECT_EQ(ErrorOf(c), "--resume needs --checkpoint_dir");
  c = Small();
  c.launch.workers = 0;
  EXPECT_EQ(ErrorOf(c), "--workers must be in [1, 1024], got 0");
  c = Small();
  c.launch.collective_timeout_s = 0;
  EXPECT_NE(ErrorOf(c).find("--collective_timeout"), std::string::npos);
  c = Small();
  c.metrics_path = "/nonexistent/m.jsonl";
  EXPECT_EQ(ErrorOf(c), "--metrics=/nonexistent/m.jsonl: directory /nonexistent does not "
                        "exist; create it or choose another path");
  c = Small();
  c.log_every = 10;
  EXPECT_EQ(ErrorOf(c), "--log_every writes its rows to the --metrics file: give --metrics=FILE too");
  c.log_every = -1;
  EXPECT_EQ(ErrorOf(c), "--log_every must be in [0, 1000000000], got -1");
  c = Small();
  c.launch.device = "tpu";
  EXPECT_NE(ErrorOf(c).find("--device=tpu is not a device"), std::string::npos);
}

// Without a GPU, --device=cuda is a usage error that says why once.
TEST(FashionMnistTrainTest, CudaWithoutAGpuIsAUsageError) {
  FashionMnistConfig c = Small();
  c.launch.device = "cuda";
  const std::string error = ErrorOf(c);
  if (error == "<no error>") GTEST_SKIP() << "this machine has a usable GPU";
  EXPECT_EQ(error.rfind("--device=cuda cannot be used: ", 0), 0u) << error;
  EXPECT_NE(error.find("use --device=cpu, or --device=auto"), std::string::npos) << error;
  EXPECT_EQ(error.find("no CUDA devices"), std::string::npos) << error;
}

}  // namespace
}  // namespace tandem
