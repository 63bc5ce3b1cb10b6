// The consumer's training run through Tandem's public targets: the loss
// goes down on the CPU and on GPUs, and a run repeats bitwise.
#include "tiny_training.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/backend_registry.h"

namespace consumer {
namespace {

void ExpectLearns(const TinyResult& result, int epochs) {
  const std::vector<float>& losses = result.test_losses;
  ASSERT_EQ(losses.size(), static_cast<size_t>(epochs));
  EXPECT_LT(losses.back(), losses.front())
      << "first " << losses.front() << ", last " << losses.back();
  EXPECT_GE(result.test_accuracy, 0.8);
}

TEST(TinyTrainingTest, LearnsOnCpuWorkers) {
  TinyTrainingOptions options;
  const TinyResult result = TrainTinyMlp(options);
  ExpectLearns(result, options.epochs);
  EXPECT_EQ(TrainTinyMlp(options).parameters, result.parameters) << "same seed, other result";
}

TEST(TinyTrainingTest, LearnsOnGpuWorkers) {
  const int gpus = tandem::CudaDeviceCount();
  if (gpus == 0) {
    GTEST_SKIP() << "skipping the CUDA run: " << tandem::CudaUnavailableReason();
  }
  TinyTrainingOptions options;
  options.device = "cuda";
  options.workers = std::min(2, gpus);
  ExpectLearns(TrainTinyMlp(options), options.epochs);
}

}  // namespace
}  // namespace consumer
