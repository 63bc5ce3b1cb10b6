// Smoke test of the example's training loop on a subset of Fashion-MNIST,
// through the same library the binary uses.
#include "examples/fashion_mnist/train.h"

#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace tandem
