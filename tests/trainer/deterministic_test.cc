// The Trainer with --deterministic (Note [Deterministic sums] in
// parallel/deterministic_sum.cc) on the synthetic task (synthetic_task.h),
// threads transport: final parameters bitwise the same for 1, 2 and 4
// workers, sharded or not, with and without clipping, with a last batch
// smaller than the pieces, resumed on another worker count; without the mode
// they differ (so the comparison can fail); and the flags it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/trainer/synthetic_task.h"
#include "trainer/trainer.h"

namespace tandem {
namespace {

struct Variant {
  bool sharded = false;
  float clip = 0.f;
  std::string optimizer = "adamw";
};

TrainConfig Quick(int workers, bool deterministic, const Variant& v = {}) {
  TrainConfig c;
  c.steps = 14;            // 384 / 36 = 10.67 batches: the 11th is a 24-row rest
  c.batch_size = 36;       // pieces of 9: not a multiple of the row blocks
  c.quiet = true;
  c.optimizer.name = v.optimizer;
  c.optimizer.lr = 1e-2f;
  c.optimizer.momentum = v.optimizer == "sgd" ? 0.9f : 0.f;
  c.clip_grad_norm = v.clip;
  c.launch.workers = workers;
  c.shard_optimizer = v.sharded;
  c.deterministic = deterministic;
  c.micro_shards = 4;
  return c;
}

std::vector<float> TrainOn(const TrainConfig& config) {
  testing::SyntheticTask f;
  std::ostringstream log;
  return Train(f.task, config, log).parameters;
}

// Bitwise: memcmp, so -0 and +0 (and NaN payloads) count as different.
void ExpectBitwiseEqual(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&a[i], &b[i], sizeof(float)))
        << what << ": parameter " << i << " is " << a[i] << " vs " << b[i];
  }
}

TEST(DeterministicTest, OneTwoAndFourWorkersGiveTheSameBits) {
  const std::vector<float> one = TrainOn(Quick(1, true));
  for (int workers : {2, 4}) {
    ExpectBitwiseEqual(one, TrainOn(Quick(workers, true)),
                       std::to_string(workers) + " workers vs 1");
  }
}

TEST(DeterministicTest, ShardedEqualsUnshardedBitwise) {
  const std::vector<float> one = TrainOn(Quick(1, true));
  for (int workers : {1, 2, 4}) {
    ExpectBitwiseEqual(one, TrainOn(Quick(workers, true, {/*sharded=*/true})),
                       "sharded on " + std::to_string(workers) + " workers vs unsharded on 1");
  }
}

TEST(DeterministicTest, ClippingAndSgdStayBitwise) {
  for (const Variant& v : {Variant{false, 0.05f, "adamw"}, Variant{true, 0.05f, "adamw"},
                           Variant{false, 0.f, "sgd"}, Variant{true, 0.05f, "sgd"}}) {
    const std::string what = std::string(v.sharded ? "sharded " : "") + v.optimizer +
                             (v.clip > 0 ? " clipped" : "");
    const std::vector<float> one = TrainOn(Quick(1, true, Variant{false, v.clip, v.optimizer}));
    for (int workers : {2, 4}) {
      ExpectBitwiseEqual(one, TrainOn(Quick(workers, true, v)),
                         what + " on " + std::to_string(workers) + " workers vs 1");
    }
  }
}

// The check above can fail: without the mode the sums are grouped by
// worker, and 1 and 4 workers differ in the last bits.
TEST(DeterministicTest, WithoutTheModeWorkerCountsDiffer) {
  const std::vector<float> one = TrainOn(Quick(1, false));
  const std::vector<float> four = TrainOn(Quick(4, false));
  ASSERT_EQ(one.size(), four.size());
  EXPECT_NE(0, std::memcmp(one.data(), four.data(), one.size() * sizeof(float)));
}

// Same result as training on the same data without the mode, to float32
// rounding: the pieces change only how the sum is grouped.
TEST(DeterministicTest, TrainsAsTheOrdinaryStep) {
  const std::vector<float> plain = TrainOn(Quick(1, false));
  const std::vector<float> tree = TrainOn(Quick(2, true));
  ASSERT_EQ(plain.size(), tree.size());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_NEAR(plain[i], tree[i], 1e-5f) << i;
}

// A checkpoint of a deterministic run resumes bitwise on another worker
// count, sharded or not: saved by 4 sharded workers at step 5 and finished
// by 1 unsharded one, and saved by 1 and finished by 2 sharded.
TEST(DeterministicTest, ResumesBitwiseAtAnotherWorkerCountShardedOrNot) {
  struct Case {
    int first_workers;
    bool first_sharded;
    int then_workers;
    bool then_sharded;
  };
  const std::vector<float> whole = TrainOn(Quick(1, true));
  int n = 0;
  for (const Case& k : {Case{4, true, 1, false}, Case{1, false, 2, true}}) {
    const std::string what = std::to_string(k.first_workers) +
                             (k.first_sharded ? " sharded" : "") + " then " +
                             std::to_string(k.then_workers) + (k.then_sharded ? " sharded" : "");
    TrainConfig first = Quick(k.first_workers, true, Variant{k.first_sharded});
    first.checkpoint_dir = ::testing::TempDir() + "deterministic_resume_" + std::to_string(n++);
    first.max_steps = 5;
    TrainOn(first);
    TrainConfig rest = Quick(k.then_workers, true, Variant{k.then_sharded});
    rest.checkpoint_dir = first.checkpoint_dir;
    rest.resume = true;
    testing::SyntheticTask f;
    std::ostringstream log;
    rest.quiet = false;
    const TrainResult resumed = Train(f.task, rest, log);
    EXPECT_NE(log.str().find("at step 5 "), std::string::npos) << what << ": " << log.str();
    ExpectBitwiseEqual(whole, resumed.parameters, what + " vs straight on 1");
  }
}

// A step skipped for a non-finite loss (--skip_nonfinite) leaves no kept
// pieces behind: the steps after it are summed afresh, finite, and the same
// on 1 and 2 workers.
TEST(DeterministicTest, ASkippedStepLeavesNoPiecesBehind) {
  std::vector<float> final[2];
  for (int workers : {1, 2}) {
    testing::SyntheticTask f;
    // Example 5 overflows the first layer: its step's loss is not finite.
    for (int j = 0; j < 8; ++j) f.train.features.data()[5 * 8 + j] = 3e38f;
    TrainConfig c = Quick(workers, true);
    c.skip_nonfinite = true;
    c.quiet = false;
    std::ostringstream log;
    final[workers - 1] = Train(f.task, c, log).parameters;
    EXPECT_NE(log.str().find(" non-finite step(s)"), std::string::npos) << log.str();
    for (float v : final[workers - 1]) ASSERT_TRUE(std::isfinite(v)) << workers << " workers";
  }
  ExpectBitwiseEqual(final[0], final[1], "2 workers vs 1 with a skipped step");
}

void ExpectUsageError(const TrainConfig& config, const std::string& needle) {
  testing::SyntheticTask f;
  std::ostringstream log;
  try {
    Train(f.task, config, log);
    FAIL() << "expected a UsageError naming " << needle;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DeterministicTest, RefusesWhatItCannotKeepBitwise) {
  TrainConfig c = Quick(1, true);
  c.micro_shards = 6;
  ExpectUsageError(c, "--micro_shards=6 is not a power of two");
  c = Quick(8, true);
  ExpectUsageError(c, "not --workers=8");
  c = Quick(3, true);
  ExpectUsageError(c, "not --workers=3");
  c = Quick(1, true);
  c.accumulate = 2;
  ExpectUsageError(c, "--accumulate cannot be combined with --deterministic");
  c = Quick(1, true);
  c.bf16_allreduce = true;
  ExpectUsageError(c, "--bf16_allreduce cannot be combined with --deterministic");
  c = Quick(1, true);
  c.launch.device = "cuda";
  ExpectUsageError(c, "--deterministic runs on the CPU only");
  c = Quick(1, true);
  c.batch_size = 2;
  ExpectUsageError(c, "smaller than --micro_shards=4");
}

}  // namespace
}  // namespace tandem
