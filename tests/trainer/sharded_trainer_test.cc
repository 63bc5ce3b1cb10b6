// The Trainer with --shard_optimizer (ZeRO-1, parallel/sharded_optimizer.h)
// on the synthetic task (synthetic_task.h), threads transport: the same
// parameters as without sharding, checkpoints that resume at any worker
// count sharded or not, the state bytes each worker holds, and the flags it
// refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/device.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "layers/mlp.h"
#include "layers/precision.h"
#include "parallel/checkpointer.h"
#include "report/metrics_log.h"
#include "trainer/flags.h"
#include "tests/trainer/synthetic_task.h"
#include "trainer/trainer.h"

namespace tandem {
namespace {

// MLP 8-16-3: 195 parameters, so every bucket is padded for 2 and 4 workers.
constexpr int64_t kParameters = 8 * 16 + 16 + 16 * 3 + 3;

using Fixture = testing::SyntheticTask;

// A few AdamW steps: AdamW keeps two moments per parameter, the state
// sharding divides.
TrainConfig Quick(int workers, bool sharded) {
  TrainConfig c;
  c.steps = 8;
  c.batch_size = 32;
  c.quiet = true;
  c.optimizer.name = "adamw";
  c.optimizer.lr = 1e-2f;
  c.optimizer.weight_decay = 0.01f;
  c.launch.workers = workers;
  c.shard_optimizer = sharded;
  return c;
}

TrainResult TrainOn(const TrainConfig& config, std::ostringstream* log = nullptr) {
  Fixture f;
  std::ostringstream ignored;
  return Train(f.task, config, log ? *log : ignored);
}

// Sharded and unsharded sum the same gradients, in another order on other
// worker counts or with clipping's factor: float32 rounding (up to 3e-8
// seen, on parameters of about 0.25).
constexpr float kTolerance = 1e-6f;

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tolerance) << "parameter " << i;
}

std::string TempDir(const std::string& name) { return ::testing::TempDir() + "sharded_" + name; }

TEST(ShardedTrainerTest, MatchesUnshardedOnTwoAndFourWorkers) {
  for (const int workers : {2, 4}) {
    const TrainResult plain = TrainOn(Quick(workers, false));
    const TrainResult sharded = TrainOn(Quick(workers, true));
    ExpectNear(sharded.parameters, plain.parameters, kTolerance);
    ASSERT_FALSE(sharded.evals.empty());
    EXPECT_EQ(sharded.evals.back().step, 8);
    EXPECT_NEAR(sharded.evals.back().loss, plain.evals.back().loss, 1e-5) << workers;
    EXPECT_NEAR(sharded.test_accuracy, plain.test_accuracy, 1e-6) << workers;
  }
}

// Clipping by the global norm (the hook's, over every worker's shards),
// gradient accumulation and SGD with momentum: as unsharded.
TEST(ShardedTrainerTest, ClipsAccumulatesAndRunsSgdAsUnsharded) {
  TrainConfig c = Quick(4, false);
  c.clip_grad_norm = 0.05f;  // below the gradient's norm: every step clips
  c.accumulate = 2;
  TrainConfig s = c;
  s.shard_optimizer = true;
  ExpectNear(TrainOn(s).parameters, TrainOn(c).parameters, kTolerance);
  c = Quick(2, false);
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.1f;
  c.optimizer.momentum = 0.9f;
  s = c;
  s.shard_optimizer = true;
  ExpectNear(TrainOn(s).parameters, TrainOn(c).parameters, kTolerance);
}

// --log_every's gradient norm is over every worker's shards (a sharded
// gradient holds the reduced sum only in this worker's block).
TEST(ShardedTrainerTest, LogsTheGradientNormOfTheWholeGradient) {
  std::vector<double> norms[2];
  for (const bool sharded : {false, true}) {
    TrainConfig c = Quick(4, sharded);
    c.log_every = 2;
    c.metrics_path = TempDir(sharded ? "log_sharded.jsonl" : "log_plain.jsonl");
    TrainOn(c);
    for (const MetricsRow& row : ReadMetricsLog(c.metrics_path)) {
      if (row.String("kind") == "step") norms[sharded].push_back(row.Number("grad_norm"));
    }
  }
  ASSERT_EQ(norms[0].size(), 4u);
  ASSERT_EQ(norms[1].size(), norms[0].size());
  for (size_t i = 0; i < norms[0].size(); ++i) {
    EXPECT_GT(norms[0][i], 0.0);
    EXPECT_NEAR(norms[1][i], norms[0][i], 1e-5 * norms[0][i]) << "row " << i;
  }
}

// With 4 workers each holds a quarter of AdamW's 8 bytes per parameter, up
// to the padding (under one element per worker and bucket); the --metrics
// train row reports it for every run.
TEST(ShardedTrainerTest, EachOfFourWorkersHoldsAQuarterOfTheState) {
  TrainConfig plain = Quick(4, false), sharded = Quick(4, true);
  plain.metrics_path = TempDir("bytes_plain.jsonl");
  sharded.metrics_path = TempDir("bytes_sharded.jsonl");
  const int64_t whole = TrainOn(plain).evals.back().optimizer_state_bytes;
  const int64_t quarter = TrainOn(sharded).evals.back().optimizer_state_bytes;
  EXPECT_EQ(whole, kParameters * 8);
  EXPECT_GE(quarter * 4, whole);
  EXPECT_LE(quarter * 4, whole + 4 * 8);  // one bucket: padded to 196 elements
  auto reported = [](const std::string& path) {
    double bytes = -1;
    for (const MetricsRow& row : ReadMetricsLog(path)) {
      if (row.String("split") == "train") bytes = row.Number("optimizer_state_bytes");
    }
    return bytes;
  };
  EXPECT_EQ(reported(plain.metrics_path), static_cast<double>(whole));
  EXPECT_EQ(reported(sharded.metrics_path), static_cast<double>(quarter));
}

// The checkpoint of a sharded run is the one an unsharded run writes: the
// same tensors, names, shapes and order, the values to rounding.
TEST(ShardedTrainerTest, SavesTheCheckpointOfAnUnshardedRun) {
  CheckpointState saved[2];
  for (const bool sharded : {false, true}) {
    TrainConfig c = Quick(4, sharded);
    c.checkpoint_dir = TempDir(sharded ? "file_sharded" : "file_plain");
    c.max_steps = 5;
    TrainOn(c);
    saved[sharded] = ReadCheckpoint(CheckpointPath(c.checkpoint_dir));
  }
  const CheckpointState &plain = saved[0], &sharded = saved[1];
  EXPECT_EQ(sharded.step, 5);
  EXPECT_EQ(sharded.epoch, plain.epoch);
  EXPECT_EQ(sharded.batch_in_epoch, plain.batch_in_epoch);
  EXPECT_EQ(sharded.extra_u64, plain.extra_u64);
  ASSERT_EQ(sharded.tensors.size(), plain.tensors.size());
  ASSERT_EQ(plain.tensors.size(), 4u * 3);  // 4 parameters, each with 2 moments
  for (size_t i = 0; i < plain.tensors.size(); ++i) {
    EXPECT_EQ(sharded.tensors[i].name, plain.tensors[i].name);
    EXPECT_EQ(sharded.tensors[i].shape, plain.tensors[i].shape) << plain.tensors[i].name;
    ExpectNear(sharded.tensors[i].data, plain.tensors[i].data, kTolerance);
  }
}

// Saved by 4 sharded workers at step 5 and finished by 1 unsharded worker:
// the uninterrupted sharded run's parameters, to rounding. The reverse, 1
// unsharded worker and then 2 sharded ones, likewise.
TEST(ShardedTrainerTest, ResumesAtAnotherWorkerCountShardedOrNot) {
  struct Case {
    int first_workers;
    bool first_sharded;
    int then_workers;
    bool then_sharded;
  };
  for (const Case& k : {Case{4, true, 1, false}, Case{1, false, 2, true}}) {
    SCOPED_TRACE(std::to_string(k.first_workers) + (k.first_sharded ? " sharded" : "") +
                 " then " + std::to_string(k.then_workers) + (k.then_sharded ? " sharded" : ""));
    const TrainResult whole = TrainOn(Quick(k.first_workers, k.first_sharded));
    TrainConfig first = Quick(k.first_workers, k.first_sharded);
    first.checkpoint_dir = TempDir("resume_" + std::to_string(k.first_workers));
    first.max_steps = 5;
    TrainOn(first);
    TrainConfig rest = Quick(k.then_workers, k.then_sharded);
    rest.checkpoint_dir = first.checkpoint_dir;
    rest.resume = true;
    rest.quiet = false;
    std::ostringstream log;
    const TrainResult resumed = TrainOn(rest, &log);
    // Continued from step 5, not trained afresh: with the moments restored,
    // or its 3 steps would move the parameters otherwise.
    EXPECT_NE(log.str().find("at step 5 "), std::string::npos) << log.str();
    ASSERT_FALSE(resumed.evals.empty());
    EXPECT_EQ(resumed.evals.back().step, 8);
    ExpectNear(resumed.parameters, whole.parameters, kTolerance);
  }
}

// On the same worker count a sharded run stopped and resumed sharded ends
// bitwise where the uninterrupted one does.
// The final parameters of `c` run to step 3 with a checkpoint in `dir`,
// then resumed with the same configuration to its end.
std::vector<float> StoppedAndResumed(TrainConfig c, const std::string& dir) {
  c.export_safetensors.clear();
  c.checkpoint_dir = TempDir(dir);
  c.max_steps = 3;
  TrainOn(c);
  c.max_steps = 0;
  c.resume = true;
  return TrainOn(c).parameters;
}

TEST(ShardedTrainerTest, ResumingOnTheSameWorkersIsBitwise) {
  const TrainResult whole = TrainOn(Quick(2, true));
  EXPECT_EQ(StoppedAndResumed(Quick(2, true), "bitwise"), whole.parameters);
}

// Every parameter of a fresh model of the task, in `precision`, after
// importing the safetensors file at `path`, in model order.
std::vector<float> Imported(const std::string& path, Precision precision, uint64_t seed) {
  Fixture f;
  std::unique_ptr<Layer> model =
      f.task.build_model(ModelContext{Device::Cpu(), precision, seed, 0});
  ImportSafetensors(path, *model);
  std::vector<float> imported;
  for (NamedParameter& p : model->Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    imported.insert(imported.end(), v.begin(), v.end());
  }
  return imported;
}

// --export_safetensors writes the gathered parameters, which every worker
// holds whole.
TEST(ShardedTrainerTest, ExportsTheWholeParameters) {
  TrainConfig c = Quick(4, true);
  c.export_safetensors = TempDir("export.safetensors");
  const TrainResult r = TrainOn(c);
  EXPECT_EQ(Imported(c.export_safetensors, Precision::kFp32, c.seed), r.parameters);
}

// In bf16 a sharded step gathers the working copies, and each worker's
// float32 masters are current only in its own shards until the Trainer
// gathers them: before a checkpoint (a resumed run ends bitwise where the
// uninterrupted one does), and before the export and the result (every
// master as an unsharded bf16 run has it, to float32 rounding).
TEST(ShardedTrainerTest, Bf16CheckpointsAndExportsHoldEveryMaster) {
  if (!GetBackend(Device::Cpu()).MultipliesBFloat16()) {
    GTEST_SKIP() << "this CPU does not multiply bfloat16, so bf16 keeps no working copies";
  }
  TrainConfig c = Quick(2, true);
  c.precision = Precision::kBf16;
  TrainConfig plain = c;
  plain.shard_optimizer = false;
  const TrainResult unsharded = TrainOn(plain);
  c.export_safetensors = TempDir("bf16_export.safetensors");
  const TrainResult whole = TrainOn(c);
  ExpectNear(whole.parameters, unsharded.parameters, kTolerance);
  EXPECT_EQ(Imported(c.export_safetensors, Precision::kBf16, c.seed), whole.parameters);

  EXPECT_EQ(StoppedAndResumed(c, "bf16_bitwise"), whole.parameters);
}

// Parsed as the examples parse their command line, then refused by Train
// before anything starts, naming both flags.
TEST(ShardedTrainerTest, RefusesBf16AllReduce) {
  TrainConfig config;
  TrainerCommandLine cli("test", config);
  const char* argv[] = {"test", "--shard_optimizer", "--bf16_allreduce", "--workers=2"};
  std::ostringstream out, err;
  ASSERT_FALSE(cli.Parse(4, argv, out, err)) << err.str();
  ASSERT_TRUE(config.shard_optimizer);
  ASSERT_TRUE(config.bf16_allreduce);
  Fixture f;
  std::ostringstream log;
  try {
    Train(f.task, config, log);
    FAIL() << "--shard_optimizer with --bf16_allreduce accepted";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--shard_optimizer"), std::string::npos) << what;
    EXPECT_NE(what.find("--bf16_allreduce"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tandem
