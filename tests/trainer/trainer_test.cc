// The Trainer on a small synthetic task: gradient accumulation, clipping,
// prefetching, runs by steps, and the checks on a task.
#include "trainer/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/rng.h"
#include "examples/custom_layer/add_branches.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/residual.h"
#include "tests/trainer/synthetic_task.h"

namespace tandem {
namespace {

using Fixture = testing::SyntheticTask;

TrainConfig Quick() {
  TrainConfig c;
  c.epochs = 2;
  c.batch_size = 32;
  c.quiet = true;
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.1f;
  c.launch.workers = 2;
  return c;
}

TrainResult TrainOn(const TrainConfig& config) {
  Fixture f;
  std::ostringstream log;
  return Train(f.task, config, log);
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tolerance) << "parameter " << i;
}

TEST(TrainerTest, LearnsTheSyntheticTask) {
  const TrainResult r = TrainOn(Quick());
  ASSERT_EQ(r.evals.size(), 2u);
  EXPECT_EQ(r.evals[1].step, 2 * 12);
  EXPECT_LT(r.evals[1].loss, r.evals[0].loss);
  EXPECT_GT(r.test_accuracy, 0.6);
}

// Micro-batches accumulate to the same gradient as the whole shard: the
// parameters agree to float32 rounding (sums in another order).
TEST(TrainerTest, AccumulatingMicroBatchesMatchesWholeBatches) {
  TrainConfig c = Quick();
  const TrainResult whole = TrainOn(c);
  c.accumulate = 4;
  const TrainResult micro = TrainOn(c);
  ExpectNear(micro.parameters, whole.parameters, 2e-5f);
  EXPECT_NE(micro.parameters, whole.parameters);  // really another summation
  // The reported loss sums the micro-batches' losses.
  EXPECT_NEAR(micro.evals.back().loss, whole.evals.back().loss, 1e-5);
  c.launch.workers = 1;
  c.accumulate = 3;  // uneven micro-batches: 32 rows as 10, 11, 11
  ExpectNear(TrainOn(c).parameters, whole.parameters, 2e-5f);
}

// A bound the gradient never reaches changes nothing, bitwise (the
// optimizer steps after the reduction instead of per bucket, which gives the
// same bits); a tight bound slows learning.
TEST(TrainerTest, ClippingAtAnUnreachedNormChangesNothing) {
  TrainConfig c = Quick();
  const TrainResult plain = TrainOn(c);
  c.clip_grad_norm = 1e9f;
  EXPECT_EQ(TrainOn(c).parameters, plain.parameters);
  c.clip_grad_norm = 1e-4f;
  const TrainResult clipped = TrainOn(c);
  EXPECT_GT(clipped.evals.back().loss, plain.evals.back().loss + 0.05);
}

TEST(TrainerTest, PrefetchingGivesTheSameBits) {
  TrainConfig c = Quick();
  const TrainResult background = TrainOn(c);
  c.prefetch = false;
  EXPECT_EQ(TrainOn(c).parameters, background.parameters);
}

// --steps: exactly that many steps, on into a second epoch; evaluations
// every eval_every steps and at the end.
TEST(TrainerTest, RunsByStepsAcrossEpochs) {
  TrainConfig c = Quick();
  c.steps = 17;  // 12 steps an epoch
  c.eval_every = 5;
  const TrainResult r = TrainOn(c);
  std::vector<int64_t> steps;
  for (const EvalStats& e : r.evals) steps.push_back(e.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 10, 15, 17}));
  EXPECT_EQ(r.evals.back().epoch, 2);
}

// A run by steps stopped at step 10 (mid-epoch 1) and resumed to its end
// equals the run never stopped, bitwise; so does one stopped in epoch 2.
TEST(TrainerTest, ResumingARunByStepsIsBitwiseTheUninterruptedRun) {
  TrainConfig c = Quick();
  c.steps = 17;  // 12 steps an epoch
  c.optimizer.name = "adamw";
  c.optimizer.lr = 1e-2f;
  const TrainResult whole = TrainOn(c);
  for (const int64_t stop : {10, 14}) {
    TrainConfig first = c;
    first.checkpoint_dir = ::testing::TempDir() + "steps_" +
                           std::to_string(stop);
    first.max_steps = stop;
    TrainOn(first);
    TrainConfig rest = first;
    rest.max_steps = 0;
    rest.resume = true;
    const TrainResult resumed = TrainOn(rest);
    EXPECT_EQ(resumed.parameters, whole.parameters) << "stopped at step " << stop;
    ASSERT_FALSE(resumed.evals.empty());
    EXPECT_EQ(resumed.evals.back().step, 17);
  }
}

// A model tree the runtime must walk: a Dropout inside a Residual, and one
// in a Sequential inside a user container (AddBranches), beside one in the
// container's other branch. `dropout` 0 leaves them out. Each worker draws
// its own masks, as the examples seed them.
std::unique_ptr<Sequential> BranchyModel(const ModelContext& m, float dropout) {
  Rng rng(m.seed);
  const uint64_t drop_seed = m.seed + 1 + 1000 * m.rank;
  auto model = std::make_unique<Sequential>("branchy");
  model->Emplace<Linear>("fc1", 8, 16, rng, LinearOptions{Activation::kRelu});
  auto body = std::make_unique<Sequential>("body");
  body->Emplace<Linear>("fc", 16, 16, rng, LinearOptions{Activation::kRelu});
  if (dropout > 0) body->Emplace<Dropout>("drop", dropout, drop_seed);
  model->Emplace<Residual>("block", std::move(body));
  auto left = std::make_unique<Sequential>("left");
  left->Emplace<Linear>("fc", 16, 16, rng, LinearOptions{Activation::kTanh});
  if (dropout > 0) left->Emplace<Dropout>("drop", dropout, drop_seed + 1);
  std::unique_ptr<Layer> right = std::make_unique<Linear>("right", 16, 16, rng);
  if (dropout > 0) right = std::make_unique<Dropout>("right_drop", dropout, drop_seed + 2);
  model->Emplace<example::AddBranches>("pair", std::move(left), std::move(right));
  model->Emplace<Linear>("out", 16, 3, rng);
  return model;
}

TrainResult TrainBranchy(const TrainConfig& config, float dropout) {
  Fixture f;
  f.task.build_model = [dropout](const ModelContext& m) { return BranchyModel(m, dropout); };
  std::ostringstream log;
  return Train(f.task, config, log);
}

// Every Dropout's position is in the checkpoint, found through the tree:
// stopped and resumed, the run ends bitwise where the uninterrupted one does.
TEST(TrainerTest, ResumingNestedDropoutsIsBitwiseTheUninterruptedRun) {
  TrainConfig c = Quick();
  c.steps = 17;
  const TrainResult whole = TrainBranchy(c, 0.3f);
  TrainConfig first = c;
  first.checkpoint_dir = ::testing::TempDir() + "nested_dropout";
  first.max_steps = 7;
  TrainBranchy(first, 0.3f);
  TrainConfig rest = first;
  rest.max_steps = 0;
  rest.resume = true;
  const TrainResult resumed = TrainBranchy(rest, 0.3f);
  EXPECT_EQ(resumed.parameters, whole.parameters);
}

// A model with a block of two branches joined by an add trains on 2 workers,
// gradients reduced while backward runs, as on one.
TEST(TrainerTest, TwoBranchModelTrainsDataParallelAsOnOneWorker) {
  TrainConfig one = Quick();
  one.launch.workers = 1;
  TrainConfig two = Quick();
  ASSERT_TRUE(two.overlap);
  const TrainResult a = TrainBranchy(one, 0.f), b = TrainBranchy(two, 0.f);
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  ASSERT_FALSE(a.parameters.empty());
  ExpectNear(b.parameters, a.parameters, 1e-5f);
}

TEST(TrainerTest, WarmUpRampsTheLearningRate) {
  TrainConfig c = Quick();
  c.lr_schedule = "constant";
  c.epochs = 1;
  c.max_steps = 1;
  const TrainResult full = TrainOn(c);
  c.warmup_steps = 1000;  // the first step at lr / 1000
  const TrainResult ramped = TrainOn(c);
  // Parameters moved 1000 times less (SGD without momentum), up to the
  // rounding of parameter + update in float32.
  TrainConfig none = Quick();
  none.max_steps = 1;
  none.optimizer.lr = 0.f;
  const TrainResult start = TrainOn(none);
  double moved_full = 0, moved_ramped = 0;
  for (size_t i = 0; i < start.parameters.size(); ++i) {
    moved_full += std::abs(full.parameters[i] - start.parameters[i]);
    moved_ramped += std::abs(ramped.parameters[i] - start.parameters[i]);
  }
  EXPECT_NEAR(moved_ramped * 1000, moved_full, 0.05 * moved_full);
  EXPECT_GT(moved_full, 0.0);
}

// On one GPU, with accumulation, clipping and prefetching through pinned
// copies on a lane of their own: the CPU's result to float32 rounding.
TEST(TrainerTest, TrainsOnAGpuAsOnTheCpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU: " << CudaUnavailableReason();
  TrainConfig c = Quick();
  c.launch.workers = 1;
  c.accumulate = 2;
  c.clip_grad_norm = 1.f;
  const TrainResult cpu = TrainOn(c);
  c.launch.device = "cuda";
  const TrainResult gpu = TrainOn(c);
  ExpectNear(gpu.parameters, cpu.parameters, 1e-4f);
  EXPECT_NEAR(gpu.test_accuracy, cpu.test_accuracy, 0.02);
}

TEST(TrainerTest, BadTasksAndFlagsAreNamed) {
  Fixture f;
  std::ostringstream log;
  TrainConfig c = Quick();
  c.epochs = 0;
  try {
    Train(f.task, c, log);
    FAIL() << "--epochs=0 accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--epochs must be in [1, 1000000000], got 0");
  }
  c = Quick();
  c.accumulate = 0;
  EXPECT_THROW(Train(f.task, c, log), UsageError);
  c.accumulate = 17;  // 32 examples for 2 workers x 17 micro-batches
  try {
    Train(f.task, c, log);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--accumulate"), std::string::npos) << e.what();
  }
  data::TensorDataset wide(Tensor::Zeros({4, 9}), Tensor::Zeros({4}), 3, "wide.npy");
  f.task.test = &wide;
  try {
    Train(f.task, Quick(), log);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("wide.npy has 9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
