// Smoke test of the example's training loop on a subset of Fashion-MNIST,
// through the same library the binary uses.
#include "examples/fashion_mnist/train.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace {

bool HaveData() {
  return std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").good();
}

TrainConfig Small() {
  TrainConfig c;
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
  TrainConfig c = Small();
  c.launch.workers = 2;
  std::ostringstream log;
  const TrainResult r = TrainFashionMnist(c, log);
  ASSERT_EQ(r.epochs.size(), 2u);
  std::cout << "subset test accuracy " << r.test_accuracy << "\n";
  EXPECT_GT(r.test_accuracy, 0.7);
  EXPECT_LT(r.epochs[1].loss, r.epochs[0].loss);
}

TEST(FashionMnistTrainTest, WorkerCountDoesNotChangeTheResult) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainConfig c = Small();
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

// Interrupt a run at step 7 (checkpoint there), resume it, and compare with
// a run that was never interrupted: bitwise equal (CPU, threads mode).
TrainResult Interrupted(TrainConfig c, const std::string& dir, int resume_workers) {
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
  TrainConfig c = Small();
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
  TrainConfig c = Small();
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
  TrainConfig c = Small();
  c.max_train = 600;
  c.epochs = 1;
  c.checkpoint_dir = std::string(getenv("TEST_TMPDIR")) + "/resume_finished";
  std::ostringstream log;
  const TrainResult whole = TrainFashionMnist(c, log);
  c.resume = true;
  c.launch.workers = 2;
  const TrainResult resumed = TrainFashionMnist(c, log);
  EXPECT_TRUE(resumed.epochs.empty());
  EXPECT_GT(whole.test_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(resumed.test_accuracy, whole.test_accuracy);
}

TEST(FashionMnistTrainTest, ResumeRefusesAnotherRunsCheckpoint) {
  if (!HaveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainConfig c = Small();
  c.max_train = 600;
  c.epochs = 1;
  c.checkpoint_dir = std::string(getenv("TEST_TMPDIR")) + "/resume_refuse";
  std::ostringstream log;
  TrainFashionMnist(c, log);
  c.resume = true;
  c.batch_size = 60;
  try {
    TrainFashionMnist(c, log);
    FAIL() << "resumed another run's checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another --seed, --batch_size or training set"),
              std::string::npos)
        << e.what();
  }
}

std::string ErrorOf(TrainConfig c) {
  try {
    std::ostringstream log;
    TrainFashionMnist(c, log);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(FashionMnistTrainTest, BadConfigurationNamesTheFlag) {
  TrainConfig c = Small();
  c.epochs = 0;
  EXPECT_NE(ErrorOf(c).find("--epochs"), std::string::npos);
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
  EXPECT_NE(ErrorOf(c).find("--resume needs --checkpoint_dir"), std::string::npos);
}

}  // namespace
}  // namespace tandem
