// Sharded optimizer state (ZeRO-1) in threads mode: sharded AdamW and SGD
// train like the unsharded optimizer on the same workers (with gradient
// accumulation, clipping by the global norm and bfloat16 working copies);
// replicas stay bitwise identical; each worker holds 1/N of the state; the
// combinations that cannot work are refused with errors that say why.
#include "parallel/sharded_optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/embedding.h"
#include "layers/layer.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/precision.h"
#include "layers/residual.h"
#include "layers/sequential.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer.h"
#include "parallel/thread_communicator.h"
#include "tests/parallel/sharded_training.h"
#include "tests/support/dp_training.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::ErrorText;
using testing::MaxRelativeDifference;
using testing::ShardRun;
using testing::ShardSetup;
using testing::TrainSharded;

// Sharded and unsharded runs apply the same float32 arithmetic to the same
// reduced gradients (ReduceScatter leaves the bits AllReduce would, on the
// thread communicator); the update kernels may still round a slice's
// elements differently from a whole tensor's (vector body against tail), so
// the comparison allows a few float32 roundings, not bitwise equality.
constexpr double kFp32Tolerance = 1e-5;

// TrainSharded on n threads; every rank's run.
std::vector<ShardRun> RunThreads(int n, const ShardSetup& setup) {
  ThreadGroup group(n);
  std::vector<ShardRun> runs(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        runs[r] = TrainSharded(group.communicator(r), setup);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        group.communicator(r).Abort(e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return runs;
}

// Sharded against unsharded on the same n workers: parameters within
// `tolerance`, every replica bitwise rank 0's.
void ExpectShardedEqualsUnsharded(ShardSetup setup, const std::string& what,
                                  double tolerance = kFp32Tolerance) {
  for (int n : {2, 4}) {
    setup.shard = false;
    const std::vector<ShardRun> plain = RunThreads(n, setup);
    setup.shard = true;
    const std::vector<ShardRun> sharded = RunThreads(n, setup);
    ASSERT_EQ(sharded[0].params.size(), plain[0].params.size()) << what;
    const double diff = MaxRelativeDifference(sharded[0].params, plain[0].params);
    std::cout << what << " N=" << n << ": max relative difference sharded/unsharded " << diff
              << "\n";
    EXPECT_LE(diff, tolerance) << what << " N=" << n;
    EXPECT_NE(sharded[0].params, RunThreads(1, ShardSetup{}).at(0).params)
        << what << ": nothing trained";
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(sharded[r].params, sharded[0].params) << what << " N=" << n << ", rank " << r;
    }
    for (int64_t elements : sharded[0].bucket_elements) {
      EXPECT_EQ(elements % n, 0) << what << ": a bucket of " << elements << " elements, N=" << n;
    }
  }
}

TEST(ShardedOptimizerTest, AdamWEqualsUnsharded) {
  for (bool overlap : {true, false}) {
    ShardSetup setup;
    setup.optimizer = "adamw";
    setup.overlap = overlap;
    ExpectShardedEqualsUnsharded(setup, overlap ? "adamw" : "adamw, no overlap");
  }
}

TEST(ShardedOptimizerTest, SgdEqualsUnsharded) {
  ShardSetup setup;
  setup.optimizer = "sgd";  // momentum 0.9: sharded velocity
  ExpectShardedEqualsUnsharded(setup, "sgd");
  setup.weight_decay = 0.f;
  ExpectShardedEqualsUnsharded(setup, "sgd without weight decay");
}

// One worker: the whole bucket is its shard; nothing is communicated.
TEST(ShardedOptimizerTest, OneWorkerEqualsUnsharded) {
  for (const char* optimizer : {"adamw", "sgd"}) {
    ShardSetup setup;
    setup.optimizer = optimizer;
    const std::vector<float> plain = RunThreads(1, setup)[0].params;
    setup.shard = true;
    EXPECT_LE(MaxRelativeDifference(RunThreads(1, setup)[0].params, plain), kFp32Tolerance)
        << optimizer;
  }
}

// Micro-steps accumulate into the full local gradient buckets; the last one
// reduce-scatters them.
TEST(ShardedOptimizerTest, AccumulationEqualsUnsharded) {
  ShardSetup setup;
  setup.batch = 6;
  setup.micro_steps = 3;
  ExpectShardedEqualsUnsharded(setup, "adamw, 3 micro-steps");
  setup.optimizer = "sgd";
  ExpectShardedEqualsUnsharded(setup, "sgd, 3 micro-steps");
}

// The norm over the shards (each rank's sum of squares, all-reduced) is the
// reduced gradient's norm, and clipping by it gives the unsharded result.
// The norm is summed in another order than the reference's (per shard in
// double, then over shards and ranks in float32), so the clip factor may
// differ in its last bits. AdamW moves each weight by about lr per step
// whatever the gradient's scale, so such a difference shows as an absolute
// one of a few lr * 1e-7, which near-zero weights turn into up to 1e-4 by
// MaxRelativeDifference's floor of 1e-3.
TEST(ShardedOptimizerTest, ClippingByTheGlobalNormEqualsUnsharded) {
  for (const char* optimizer : {"adamw", "sgd"}) {
    ShardSetup setup;
    setup.optimizer = optimizer;
    setup.clip = 0.05f;
    for (int n : {2, 4}) {
      const ShardRun plain = RunThreads(n, setup)[0];
      ASSERT_GT(plain.last_norm, 2 * setup.clip) << "the test must clip";
      setup.shard = true;
      const std::vector<ShardRun> sharded = RunThreads(n, setup);
      setup.shard = false;
      EXPECT_NEAR(sharded[0].last_norm, plain.last_norm, 1e-5 * plain.last_norm) << optimizer;
      for (int r = 1; r < n; ++r) EXPECT_EQ(sharded[r].last_norm, sharded[0].last_norm);
      const double diff = MaxRelativeDifference(sharded[0].params, plain.params);
      std::cout << optimizer << " clipped N=" << n << ": max relative difference " << diff
                << "\n";
      const double tolerance = std::string(optimizer) == "adamw" ? 1e-4 : kFp32Tolerance;
      EXPECT_LE(diff, tolerance) << optimizer << " N=" << n;
      for (size_t i = 0; i < plain.params.size(); ++i) {
        ASSERT_NEAR(sharded[0].params[i], plain.params[i], 1e-6) << optimizer << " element " << i;
      }
      for (int r = 1; r < n; ++r) EXPECT_EQ(sharded[r].params, sharded[0].params);
    }
  }
}

// bfloat16 working copies are refreshed from the gathered float32 masters.
// The masters match to float32 rounding, so a working copy can differ only
// where a master sits at a bfloat16 rounding boundary: 2^-8 bounds that.
TEST(ShardedOptimizerTest, Bf16WorkingCopiesFollowTheGatheredMasters) {
  ShardSetup setup;
  setup.precision = Precision::kBf16;
  ExpectShardedEqualsUnsharded(setup, "adamw bf16", std::pow(2.0, -8));
}

// Where the model computes in bfloat16 the step gathers the working copies,
// not the float32 masters: each rank's masters are current in its own
// shards only, until GatherMasters gathers them too. The gathered working
// copies are the masters rounded to bfloat16, the same bits on every rank.
TEST(ShardedOptimizerTest, Bf16GathersWorkingCopiesAndMastersOnRequest) {
  if (!GetBackend(Device::Cpu()).MultipliesBFloat16()) {
    GTEST_SKIP() << "this CPU does not multiply bfloat16, so bf16 keeps no working copies";
  }
  ShardSetup setup;
  setup.precision = Precision::kBf16;
  setup.shard = true;
  const std::vector<ShardRun> runs = RunThreads(2, setup);
  for (int r = 0; r < 2; ++r) {
    const ShardRun& run = runs[r];
    ASSERT_EQ(run.working.size(), run.params.size()) << "rank " << r;
    EXPECT_EQ(run.params, runs[0].params) << "rank " << r << ": masters after GatherMasters";
    EXPECT_EQ(run.working, runs[0].working) << "rank " << r;
    size_t stale = 0;
    for (size_t i = 0; i < run.params.size(); ++i) {
      ASSERT_EQ(run.working[i], RoundToBFloat16(run.params[i])) << "rank " << r << " element " << i;
      if (run.params_before_gather[i] != run.params[i]) ++stale;
    }
    // The other rank's shards moved over 5 steps; this rank's masters of
    // them did not, until GatherMasters.
    EXPECT_GT(stale, run.params.size() / 4) << "rank " << r;
  }
  setup.precision = Precision::kFp32;
  const ShardRun fp32 = RunThreads(2, setup)[1];
  EXPECT_TRUE(fp32.working.empty());
  EXPECT_EQ(fp32.params_before_gather, fp32.params) << "fp32: the step gathers the masters";
}

// Gathering beside the next forward changes when each layer's parameters
// arrive, not what they are: the same bits as gathering before the step
// returns, in float32 and bfloat16, with accumulation.
TEST(ShardedOptimizerTest, GatherDuringForwardGivesTheSameBits) {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    for (int micro_steps : {1, 3}) {
      ShardSetup setup;
      setup.shard = true;
      setup.precision = precision;
      setup.micro_steps = micro_steps;
      setup.batch = micro_steps == 1 ? 10 : 6;
      for (int n : {2, 4}) {
        const std::vector<ShardRun> after_step = RunThreads(n, setup);
        setup.gather_during_forward = true;
        const std::vector<ShardRun> during = RunThreads(n, setup);
        setup.gather_during_forward = false;
        for (int r = 0; r < n; ++r) {
          const std::string what = std::string(PrecisionName(precision)) + ", " +
                                   std::to_string(micro_steps) + " micro-steps, rank " +
                                   std::to_string(r) + " of " + std::to_string(n);
          EXPECT_EQ(during[r].params, after_step[r].params) << what;
          EXPECT_EQ(during[r].working, after_step[r].working) << what;
          EXPECT_EQ(during[r].state, after_step[r].state) << what;
        }
      }
    }
  }
}

// With 4 workers each holds a quarter of AdamW's moments: exactly, where the
// buckets need no padding (one bucket of 108 parameters), and within the
// padding (under one element per worker and bucket) where they do.
TEST(ShardedOptimizerTest, StateBytesPerWorkerAreOneNth) {
  ShardSetup setup;
  setup.steps = 1;
  setup.sizes = {8, 8, 4};  // 8*8+8 + 8*4+4 = 108 parameters
  setup.bucket_bytes = 1 << 20;
  const int64_t unsharded = RunThreads(4, setup)[0].state_bytes;
  EXPECT_EQ(unsharded, 108 * 2 * 4);  // m and v, float32
  setup.shard = true;
  const std::vector<ShardRun> sharded = RunThreads(4, setup);
  std::cout << "AdamW state per worker: unsharded " << unsharded << " bytes, sharded over 4 "
            << sharded[0].state_bytes << " bytes\n";
  for (const ShardRun& run : sharded) EXPECT_EQ(run.state_bytes * 4, unsharded);

  ShardSetup padded;  // 119 parameters in several buckets
  padded.steps = 1;
  const int64_t whole = RunThreads(4, padded)[0].state_bytes;
  padded.shard = true;
  const ShardRun run = RunThreads(4, padded)[0];
  const int64_t buckets = static_cast<int64_t>(run.bucket_elements.size());
  EXPECT_GT(buckets, 1);
  EXPECT_GE(run.state_bytes * 4, whole);
  EXPECT_LT(run.state_bytes * 4, whole + 4 * buckets * 2 * 4);
  int64_t padded_elements = 0;
  for (int64_t e : run.bucket_elements) padded_elements += e;
  EXPECT_EQ(run.state_bytes, padded_elements / 4 * 2 * 4);
}

// For checkpoints: GatherState gives every rank the whole state under the
// unsharded optimizer's names and shapes, equal to the unsharded state of
// the same run (and LoadState puts it back: TrainSharded checks that).
TEST(ShardedOptimizerTest, GatheredStateIsTheUnshardedState) {
  for (const char* optimizer : {"adamw", "sgd"}) {
    ShardSetup setup;
    setup.optimizer = optimizer;
    setup.steps = 3;
    const ShardRun plain = RunThreads(4, setup)[0];
    setup.shard = true;
    const std::vector<ShardRun> sharded = RunThreads(4, setup);
    ASSERT_EQ(sharded[0].state.size(), plain.state.size()) << optimizer;
    std::map<std::string, std::vector<float>> expected(plain.state.begin(), plain.state.end());
    for (const auto& [name, values] : sharded[0].state) {
      ASSERT_EQ(expected.count(name), 1u) << optimizer << ": '" << name << "'";
      EXPECT_LE(MaxRelativeDifference(values, expected[name]), kFp32Tolerance) << name;
    }
    for (int r = 1; r < 4; ++r) EXPECT_EQ(sharded[r].state, sharded[0].state) << "rank " << r;
  }
}

// --- what is refused ---

struct OneWorker {
  OneWorker() : rng(1), model(Mlp({4, 3, 2}, Activation::kRelu, rng)) {}
  void Forward() {
    loss.Forward(model->Forward(Tensor::Full({2, 4}, 0.5f)), Tensor::Zeros({2, 2}));
  }
  ThreadGroup group{1};
  Communicator& comm() { return group.communicator(0); }
  Rng rng;
  std::unique_ptr<Sequential> model;
  MseLoss loss;
};

ReducerOptions Sharded() {
  ReducerOptions options;
  options.shard_optimizer = true;
  return options;
}

TEST(ShardedOptimizerTest, ShardingWithoutTheHookIsAnError) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  w.Forward();
  const std::string error = ErrorText([&] { reducer.Backward(w.loss.Backward()); });
  EXPECT_NE(error.find("--shard_optimizer) is on but no ShardedOptimizerHook is registered"),
            std::string::npos)
      << error;
}

TEST(ShardedOptimizerTest, TheHookWithoutShardingIsAnError) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), ReducerOptions());
  auto adam = MakeOptimizer(OptimizerConfig(), w.model->Parameters());
  const std::string error = ErrorText(
      [&] { reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(*adam)); });
  EXPECT_NE(error.find("a ShardedOptimizerHook needs a Reducer built with "
                       "ReducerOptions::shard_optimizer"),
            std::string::npos)
      << error;
}

TEST(ShardedOptimizerTest, OtherHooksWithShardingAreAnError) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  auto adam = MakeOptimizer(OptimizerConfig(), w.model->Parameters());
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<CommHook> hook;
    if (i == 0) hook = std::make_unique<OptimizerUpdateHook>(*adam);
    if (i == 1) hook = std::make_unique<BFloat16CompressionHook>();
    const std::string error = ErrorText([&] { reducer.RegisterCommHook(std::move(hook)); });
    EXPECT_NE(error.find("the hook must be a ShardedOptimizerHook"), std::string::npos) << error;
  }
}

// Sharded state is updated inside the reducer's Backward only: Step, the
// whole-parameter updates and SGD's update folded into Backward are refused.
TEST(ShardedOptimizerTest, StepAndInBackwardUpdateAreRefusedOnceSharded) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  Sgd sgd(w.model->Parameters(), SgdParams{0.1f});
  ASSERT_NE(sgd.in_backward(), nullptr);  // plain SGD folds, unsharded
  InBackwardUpdate* folded = sgd.in_backward();
  reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(sgd));
  EXPECT_EQ(sgd.in_backward(), nullptr) << "sharding turns the folded update off";
  std::string error = ErrorText([&] { sgd.Step(); });
  EXPECT_NE(error.find("optimizer 'sgd' keeps sharded state"), std::string::npos) << error;
  EXPECT_NE(error.find("do not call Step()"), std::string::npos) << error;
  error = ErrorText([&] { sgd.UpdateParameters({0}, MainLane(Device::Cpu())); });
  EXPECT_NE(error.find("keeps sharded state"), std::string::npos) << error;

  w.Forward();
  BackwardArgs args = BackwardArgs::For(Device::Cpu());
  args.input_grad = false;
  args.update = folded;
  error = ErrorText([&] { reducer.BackwardWith(w.loss.Backward(), args); });
  EXPECT_NE(error.find("(BackwardArgs::update) cannot serve sharded optimizer state"),
            std::string::npos)
      << error;
  // Without it, the step runs and counts.
  w.Forward();
  reducer.Backward(w.loss.Backward());
  EXPECT_EQ(sgd.steps(), 1);
}

TEST(ShardedOptimizerTest, TheOptimizerMustHoldTheModelAndNotHaveStepped) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  std::vector<NamedParameter> some = w.model->Parameters();
  some.pop_back();
  Sgd partial(some, SgdParams{0.1f});
  std::string error = ErrorText(
      [&] { reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(partial)); });
  EXPECT_NE(error.find("build it over the model's Parameters()"), std::string::npos) << error;

  OneWorker v;
  Reducer other(*v.model, v.comm(), Sharded());
  Sgd stepped(v.model->Parameters(), SgdParams{0.1f});
  stepped.Step();
  std::vector<const float*> before;
  for (NamedParameter& p : v.model->Parameters()) before.push_back(p.value().data());
  error = ErrorText(
      [&] { other.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(stepped)); });
  EXPECT_NE(error.find("shard its state before the first step"), std::string::npos) << error;
  // Refused before anything changed: the parameters still live where they did.
  std::vector<const float*> after;
  for (NamedParameter& p : v.model->Parameters()) after.push_back(p.value().data());
  EXPECT_EQ(after, before);
}

TEST(ShardedOptimizerTest, ANegativeClipNormIsAnError) {
  OneWorker w;
  Sgd sgd(w.model->Parameters(), SgdParams{0.1f});
  ShardedOptimizerOptions options;
  options.max_grad_norm = -1.f;
  const std::string error = ErrorText([&] { ShardedOptimizerHook hook(sgd, options); });
  EXPECT_NE(error.find("(--clip_grad_norm)"), std::string::npos) << error;
}

// The optimizer's state is named by shard, so a checkpoint can tell whose it
// is: "bucket<b>.shard<r>of<N>.adam_m".
TEST(ShardedOptimizerTest, ShardStateIsNamedByBucketAndRank) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  auto adam = MakeOptimizer(OptimizerConfig(), w.model->Parameters());
  reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(*adam));
  const auto state = adam->State();
  ASSERT_EQ(state.size(), 2u * reducer.num_buckets());
  EXPECT_EQ(state[0].first, "bucket0.shard0of1.adam_m");
  EXPECT_EQ(state[1].first, "bucket0.shard0of1.adam_v");
}

// The hook over a sharded step that logs each time the reducer asks for a
// bucket's parameters.
class LoggingShardedHook : public ShardedOptimizerHook {
 public:
  LoggingShardedHook(Optimizer& optimizer, ShardedOptimizerOptions options,
                     std::vector<std::string>& log)
      : ShardedOptimizerHook(optimizer, options), log_(log) {}
  void WaitForParameters(int bucket, const Lane& lane) override {
    log_.push_back("wait " + std::to_string(bucket));
    ShardedOptimizerHook::WaitForParameters(bucket, lane);
  }

 private:
  std::vector<std::string>& log_;
};

// With gather_during_forward the next forward waits for each layer's
// buckets just before that layer (a container: before it, for everything
// below it), so the gathers of the last layers are not waited for until
// the forward reaches them.
TEST(ShardedOptimizerTest, EachLayerWaitsForItsOwnBucketsInTheNextForward) {
  ThreadGroup group(2);
  std::vector<std::vector<std::string>> logs(2);
  std::vector<std::vector<std::vector<std::string>>> bucket_names(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::string>& log = logs[r];
      Rng rng(3);
      Sequential model("net");
      model.Emplace<Embedding>("emb", 6, 4, rng, Device::Cpu());
      auto body = std::make_unique<Sequential>("body");
      body->Emplace<LayerNorm>("ln1", 8, Device::Cpu());
      body->Emplace<Linear>("fc1", 8, 8, rng, LinearOptions{Activation::kTanh});
      model.Emplace<Residual>("block", std::move(body));
      model.Emplace<Linear>("head", 8, 3, rng);
      ReducerOptions options = Sharded();
      options.bucket_bytes = 4;  // one bucket per parameter
      Reducer reducer(model, group.communicator(r), options);
      auto adam = MakeOptimizer(OptimizerConfig(), model.Parameters());
      ShardedOptimizerOptions sharded;
      sharded.gather_during_forward = true;
      reducer.RegisterCommHook(std::make_unique<LoggingShardedHook>(*adam, sharded, log));
      for (int b = 0; b < reducer.num_buckets(); ++b) {
        bucket_names[r].push_back(reducer.BucketParameterNames(b));
      }
      LayerHooks logged;  // hears each layer once the reducer has waited for it
      logged.before_forward = [&log](Layer& layer) { log.push_back("forward " + layer.Name()); };
      ForwardArgs args;
      args.hooks = &logged;
      SoftmaxCrossEntropyLoss loss;
      const Tensor tokens = Tensor::FromVector({0, 5, 2, 3, 1, 1}, {3, 2});
      const Tensor labels = Tensor::FromVector({0, 2, 1}, {3});
      for (int step = 0; step < 2; ++step) {
        log.push_back("step " + std::to_string(step));
        loss.Forward(reducer.ForwardWith(tokens, args), labels, 6);
        log.push_back("backward");
        reducer.Backward(loss.Backward());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string>& log = logs[r];
    const std::string printed = ::testing::PrintToString(log);
    const auto second = std::find(log.begin(), log.end(), "step 1");
    ASSERT_NE(second, log.end()) << printed;
    auto at = [&](const std::string& entry) {
      return std::find(second, log.end(), entry) - log.begin();
    };
    // The first step's forward had nothing to wait for.
    EXPECT_EQ(std::count_if(log.begin(), second,
                            [](const std::string& e) { return e.rfind("wait", 0) == 0; }),
              0)
        << printed;
    // Each bucket is first waited for just before the top-level layer that
    // holds it (emb, block or head) starts its forward, after the one before
    // it started.
    const std::vector<std::string> order = {"emb", "block", "head"};
    for (size_t b = 0; b < bucket_names[r].size(); ++b) {
      ASSERT_EQ(bucket_names[r][b].size(), 1u);
      const std::string name = bucket_names[r][b][0];
      const std::string top = name.substr(0, name.find('.'));
      const auto layer = std::find(order.begin(), order.end(), top) - order.begin();
      ASSERT_LT(layer, 3) << name;
      const auto wait = at("wait " + std::to_string(b));
      EXPECT_LT(wait, at("forward " + top)) << name << ": " << printed;
      if (layer > 0) {
        EXPECT_GT(wait, at("forward " + order[layer - 1])) << name << ": " << printed;
      } else {
        EXPECT_GT(wait, at("step 1")) << name << ": " << printed;
      }
      EXPECT_LT(wait, at("backward")) << name << ": " << printed;
    }
  }
}

// A forward that does not run through Reducer::Forward would read
// parameters still being gathered: the next step is refused, unless the
// caller waited for them (Reducer::WaitForParameters) first.
TEST(ShardedOptimizerTest, GatherDuringForwardNeedsTheReducersForward) {
  OneWorker w;
  Reducer reducer(*w.model, w.comm(), Sharded());
  auto adam = MakeOptimizer(OptimizerConfig(), w.model->Parameters());
  ShardedOptimizerOptions options;
  options.gather_during_forward = true;
  reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(*adam, options));
  w.Forward();  // the first step: nothing is being gathered yet
  reducer.Backward(w.loss.Backward());
  reducer.WaitForParameters();
  w.Forward();
  reducer.Backward(w.loss.Backward());
  w.Forward();
  const std::string error = ErrorText([&] { reducer.Backward(w.loss.Backward()); });
  EXPECT_NE(error.find("did not run through Reducer::Forward"), std::string::npos) << error;
  EXPECT_NE(error.find("gather_during_forward"), std::string::npos) << error;
}

}  // namespace
}  // namespace tandem
