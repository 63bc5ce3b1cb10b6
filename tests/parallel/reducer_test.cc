// The reducer in threads mode: N workers equal one worker on the global
// batch; runs are bitwise reproducible; all-reduce overlaps backward. With
// the bfloat16 compression hook: the reduced gradient is the rounded sum of
// the rounded gradients, bit for bit, within 2^-8 of one worker's; replicas
// stay identical; per-bucket updates compose with it.
#include "parallel/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/residual.h"
#include "layers/sequential.h"
#include "parallel/sharding.h"
#include "parallel/thread_communicator.h"
#include "tests/support/dp_training.h"

namespace tandem {
namespace {

using testing::DpSetup;
using testing::MaxRelativeDifference;
using testing::TrainDataParallel;

// Runs TrainDataParallel on n threads; returns every rank's parameters.
std::vector<std::vector<float>> RunThreads(int n, const DpSetup& setup) {
  ThreadGroup group(n);
  std::vector<std::vector<float>> params(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { params[r] = TrainDataParallel(group.communicator(r), setup); });
  }
  for (std::thread& t : threads) t.join();
  return params;
}

TEST(ReducerTest, WorkersEqualOneWorkerOnTheGlobalBatch) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    for (bool overlap : {true, false}) {
      DpSetup setup;
      setup.optimizer = optimizer;
      setup.overlap = overlap;
      const std::vector<float> reference = RunThreads(1, setup)[0];
      for (int n = 2; n <= 4; ++n) {
        const auto params = RunThreads(n, setup);
        const double diff = MaxRelativeDifference(params[0], reference);
        std::cout << optimizer << (overlap ? " overlap" : " no-overlap") << " N=" << n
                  << ": max relative difference to 1 worker " << diff << "\n";
        EXPECT_LE(diff, 1e-5) << optimizer << " N=" << n;
        for (int r = 1; r < n; ++r) {
          EXPECT_EQ(params[r], params[0]) << "rank " << r << " diverged from rank 0";
        }
      }
    }
  }
}

// A bf16 model: N workers against one worker on the global batch. Each
// example's bfloat16 activations and gradients come out the same whatever
// shard holds it (rows are computed and rounded independently), so the
// workers' float32 gradient sums equal the global batch's up to float32
// summation order. A master that lands near a bfloat16 rounding boundary
// can then round its working copy to the neighbouring value, which changes
// later steps by up to one bf16 step: 2^-8 relative bounds that. Replicas
// stay bitwise identical, and runs are reproducible.
TEST(ReducerTest, Bf16WorkersEqualOneWorkerOnTheGlobalBatch) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    DpSetup setup;
    setup.optimizer = optimizer;
    setup.precision = Precision::kBf16;
    const std::vector<float> reference = RunThreads(1, setup)[0];
    for (int n : {2, 3}) {
      const auto params = RunThreads(n, setup);
      const double diff = MaxRelativeDifference(params[0], reference);
      std::cout << "bf16 " << optimizer << " N=" << n
                << ": max relative difference to 1 worker " << diff << "\n";
      EXPECT_LE(diff, std::pow(2.0, -8)) << optimizer << " N=" << n;
      for (int r = 1; r < n; ++r) EXPECT_EQ(params[r], params[0]) << "rank " << r;
      EXPECT_EQ(RunThreads(n, setup)[0], params[0]) << "not reproducible";
    }
  }
}

TEST(ReducerTest, BatchSmallerThanWorldLeavesRanksEmptyWithoutHanging) {
  DpSetup setup;
  setup.batch = 2;  // ranks 2 and 3 get no examples
  const std::vector<float> reference = RunThreads(1, setup)[0];
  const auto params = RunThreads(4, setup);
  EXPECT_LE(MaxRelativeDifference(params[3], reference), 1e-5);
}

TEST(ReducerTest, ThreadsModeIsBitwiseReproducible) {
  DpSetup setup;
  const auto first = RunThreads(3, setup);
  const auto second = RunThreads(3, setup);
  ASSERT_EQ(first[0].size(), second[0].size());
  EXPECT_EQ(0, std::memcmp(first[0].data(), second[0].data(),
                           first[0].size() * sizeof(float)));
}

TEST(ReducerTest, NoSyncAccumulationEqualsOneLargeBatch) {
  DpSetup accumulate;
  accumulate.batch = 6;
  accumulate.micro_steps = 2;  // 2 x 6 examples, one all-reduce per step
  DpSetup reference_setup = accumulate;
  const std::vector<float> reference = RunThreads(1, reference_setup)[0];
  const auto params = RunThreads(2, accumulate);
  EXPECT_LE(MaxRelativeDifference(params[0], reference), 1e-5);
}

// The same updates, applied bucket by bucket inside Backward instead of by
// Step: bitwise the same parameters, with accumulation, on one worker and
// with bfloat16 compression (the update hook wrapping the compression hook)
// too.
TEST(ReducerTest, PerBucketUpdateEqualsStepBitwise) {
  for (bool bf16_allreduce : {false, true}) {
    for (const char* optimizer : {"sgd", "adamw"}) {
      for (int micro_steps : {1, 2}) {
        for (int n : {1, 3}) {
          DpSetup setup;
          setup.optimizer = optimizer;
          setup.micro_steps = micro_steps;
          setup.bf16_allreduce = bf16_allreduce;
          const auto stepped = RunThreads(n, setup);
          setup.per_bucket_update = true;
          const auto per_bucket = RunThreads(n, setup);
          const std::string what = std::string(optimizer) + ", " +
                                   std::to_string(micro_steps) + " micro-steps, " +
                                   std::to_string(n) + " workers" +
                                   (bf16_allreduce ? ", bf16 all-reduce" : "");
          EXPECT_EQ(per_bucket[0], stepped[0]) << what;
          for (int r = 1; r < n; ++r) EXPECT_EQ(per_bucket[r], per_bucket[0]) << what;
          // The update really moved the parameters (not both left unchanged).
          setup.steps = 0;
          EXPECT_NE(RunThreads(n, setup)[0], per_bucket[0]) << what;
        }
      }
    }
  }
}

TEST(ReducerTest, PerBucketUpdateNeedsTheModelsOptimizer) {
  Rng rng(1);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  auto other = Mlp({4, 3, 2}, Activation::kRelu, rng);
  ThreadGroup group(1);
  Reducer reducer(*model, group.communicator(0));
  Sgd wrong(other->Parameters(), SgdParams{});
  try {
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(wrong));
    FAIL() << "no error for an optimizer over another model's parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold parameter"), std::string::npos)
        << e.what();
  }
  std::vector<NamedParameter> some = model->Parameters();
  some.pop_back();
  Sgd partial(some, SgdParams{});
  try {
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(partial));
    FAIL() << "no error for an optimizer over part of the model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold parameter"), std::string::npos)
        << e.what();
  }
  ReducerOptions negative;
  negative.gemm_reserve = -1;
  try {
    Reducer bad(*model, group.communicator(0), negative);
    FAIL() << "a negative gemm_reserve was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_reserve is -1"), std::string::npos) << e.what();
  }
  Sgd right(model->Parameters(), SgdParams{});
  EXPECT_NO_THROW(reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(right)));
}

TEST(ReducerTest, BucketsFollowReverseLayerOrder) {
  ThreadGroup group(1);
  Rng rng(0);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  ReducerOptions options;
  options.bucket_bytes = 1;  // one parameter per bucket
  Reducer reducer(*model, group.communicator(0), options);
  ASSERT_EQ(reducer.num_buckets(), 4);
  EXPECT_EQ(reducer.BucketParameterNames(0), std::vector<std::string>{"fc2.bias"});
  EXPECT_EQ(reducer.BucketParameterNames(3), std::vector<std::string>{"fc1.weight"});
  // A bucket closes with the parameter that fills it: a bias (8 or 12
  // bytes here) joins the weight after it instead of going alone.
  options.bucket_bytes = 30;
  auto model3 = Mlp({4, 3, 2}, Activation::kRelu, rng);
  Reducer paired(*model3, group.communicator(0), options);
  ASSERT_EQ(paired.num_buckets(), 2);
  EXPECT_EQ(paired.BucketParameterNames(0),
            (std::vector<std::string>{"fc2.bias", "fc2.weight"}));
  EXPECT_EQ(paired.BucketParameterNames(1),
            (std::vector<std::string>{"fc1.bias", "fc1.weight"}));
  // Gradients are views into the buckets.
  options.bucket_bytes = 1 << 20;
  auto model2 = Mlp({4, 3, 2}, Activation::kRelu, rng);
  Reducer one_bucket(*model2, group.communicator(0), options);
  EXPECT_EQ(one_bucket.num_buckets(), 1);
  EXPECT_EQ(one_bucket.bucket_elements(0), 4 * 3 + 3 + 3 * 2 + 2);
}

// A layer with one parameter that records which lane it was given for its
// parameter work ("main": gradients first; "side": beside the input
// gradient) and says when its gradient is queued.
class LaneProbe : public Layer {
 public:
  LaneProbe(std::string name, std::vector<std::string>& seen)
      : name_(std::move(name)), seen_(seen) {}
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override { return dy; }
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    seen_.push_back(name_ + ":" + args.param_lane.name());
    if (args.on_params_ready) args.on_params_ready();
    return dy;
  }
  std::vector<NamedParameter> Parameters() override { return {{name_ + ".w", &w_}}; }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  std::vector<std::string>& seen_;
  Parameter w_{Tensor::Zeros({1})};
};

// ReducerOptions::gradients_first_layers: the first N layers with parameters
// get their parameter work on the main lane; layers without parameters are
// skipped. One rank, or no overlap, needs none of it. It is per call: the
// model keeps no mode.
TEST(ReducerTest, GradientsFirstGoesToTheLayersNearestTheInput) {
  auto first = [](int ranks, ReducerOptions options) {
    ThreadGroup group(ranks);
    std::vector<std::string> result(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        std::vector<std::string> seen;
        Sequential model("net");
        model.Add(MakeTanh("act0"));
        model.Emplace<LaneProbe>("p1", seen);
        model.Add(MakeTanh("act1"));
        model.Emplace<LaneProbe>("p2", seen);
        model.Emplace<LaneProbe>("p3", seen);
        Reducer reducer(model, group.communicator(r), options);
        model.Forward(Tensor::Zeros({1, 1}));
        reducer.Backward(Tensor::Zeros({1, 1}));
        for (const std::string& s : seen) {
          if (s.find(":main") != std::string::npos) result[r] += s.substr(0, 2) + " ";
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return result[0];
  };
  ReducerOptions options;
  EXPECT_EQ(options.gradients_first_layers, 2);
  EXPECT_EQ(first(2, options), "p2 p1 ");
  options.gradients_first_layers = 1;
  EXPECT_EQ(first(2, options), "p1 ");
  options.gradients_first_layers = 9;
  EXPECT_EQ(first(2, options), "p3 p2 p1 ");
  options.gradients_first_layers = 0;
  EXPECT_EQ(first(2, options), "");
  options.gradients_first_layers = 2;
  EXPECT_EQ(first(1, options), "");
  options.overlap = false;
  EXPECT_EQ(first(2, options), "");
  options.gradients_first_layers = -1;
  ThreadGroup one(1);
  Rng rng(0);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  EXPECT_THROW(Reducer(*model, one.communicator(0), options), Error);
}

// SGD inside Backward keeps no gradients, so there is nothing to reduce:
// two workers get an error naming the way out, one worker trains as usual.
TEST(ReducerTest, UpdateInBackwardWithSeveralWorkersIsAnError) {
  auto step = [](Communicator& comm) {
    Rng rng(1);
    auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
    Sgd sgd(model->Parameters(), SgdParams{0.1f});
    Reducer reducer(*model, comm, ReducerOptions());
    MseLoss loss;
    loss.Forward(model->Forward(Tensor::Full({2, 4}, 0.5f)), Tensor::Zeros({2, 2}));
    BackwardArgs args = BackwardArgs::For(Device::Cpu());
    args.update = sgd.in_backward();
    reducer.BackwardWith(loss.Backward(), args);
    sgd.Step();
  };
  ThreadGroup group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        step(group.communicator(r));
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("register an OptimizerUpdateHook"), std::string::npos) << e;
  }
  ThreadGroup one(1);
  EXPECT_NO_THROW(step(one.communicator(0)));
}

// Timestamps, not sleeps: with overlap on, the first bucket's all-reduce
// starts before backward of the first layer has finished; with overlap off,
// only after backward has ended.
TEST(ReducerTest, AllReduceOverlapsBackward) {
  for (bool overlap : {true, false}) {
    ThreadGroup group(2);
    struct Times {
      ReducerTimeline::Clock::time_point backward_start, first_bucket_start,
          first_layer_done, backward_end;
    };
    std::vector<Times> timelines(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        Rng rng(1);
        // Six 384-wide layers: backward of the early layers takes
        // milliseconds, long after the last layer's bucket is ready.
        auto model = Mlp({384, 384, 384, 384, 384, 384, 10}, Activation::kRelu, rng);
        ReducerOptions options;
        options.bucket_bytes = 384 * 384 * 4;  // about one layer per bucket
        options.overlap = overlap;
        Reducer reducer(*model, group.communicator(r), options);
        SoftmaxCrossEntropyLoss loss;
        Tensor x = Tensor::Full({256, 384}, 0.5f);
        Tensor y = Tensor::Zeros({256});
        for (int step = 0; step < 3; ++step) {
          loss.Forward(model->Forward(x), y);
          reducer.Backward(loss.Backward());
        }
        const ReducerTimeline& t = reducer.last_timeline();
        timelines[r] = {t.backward_start, t.bucket_start[0], t.layer_done[0], t.backward_end};
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Times& t : timelines) {
      const double first_start_ms =
          std::chrono::duration<double, std::milli>(t.first_bucket_start - t.backward_start).count();
      const double layer0_done_ms =
          std::chrono::duration<double, std::milli>(t.first_layer_done - t.backward_start).count();
      std::cout << (overlap ? "overlap on" : "overlap off")
                << ": first bucket all-reduce started at " << first_start_ms
                << " ms; first layer's backward ended at " << layer0_done_ms << " ms\n";
      if (overlap) {
        EXPECT_LT(t.first_bucket_start, t.first_layer_done);
      } else {
        EXPECT_GE(t.first_bucket_start, t.backward_end);
      }
    }
  }
}

// A communicator that writes down the all-reduces it is asked for, then
// has `inner` run them.
class LoggingComm : public Communicator {
 public:
  LoggingComm(Communicator& inner, std::vector<std::string>& log)
      : inner_(inner), log_(log) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string Describe() const override { return "logging " + inner_.Describe(); }
  void Abort(const std::string& reason) override { inner_.Abort(reason); }

 protected:
  std::shared_ptr<Work> Start(const Collective& c) override {
    if (c.kind == CollectiveKind::kAllReduce) {
      log_.push_back("all-reduce " + std::to_string(c.count));
      return inner_.AllReduce(Ptr{c.data, c.dtype}, c.count, c.op);
    }
    return inner_.Broadcast(Ptr{c.data, c.dtype}, c.count, c.root);
  }

 private:
  Communicator& inner_;
  std::vector<std::string>& log_;
};

// The per-bucket update hook, logging each update.
class LoggingUpdateHook : public OptimizerUpdateHook {
 public:
  LoggingUpdateHook(Optimizer& optimizer, std::vector<std::string>& log)
      : OptimizerUpdateHook(optimizer), log_(log) {}
  void AfterReduce(const GradBucket& bucket, Work& work,
                   const std::vector<Lane>& compute) override {
    log_.push_back("update " + std::to_string(bucket.index));
    OptimizerUpdateHook::AfterReduce(bucket, work, compute);
  }

 private:
  std::vector<std::string>& log_;
};

// y = x * w, with w of `size` elements (only w[0] is used); says its
// gradient is queued before it computes the input gradient, as Linear does.
class EarlyNotifyingScale : public Layer {
 public:
  EarlyNotifyingScale(std::string name, int64_t size, std::vector<std::string>& log)
      : name_(std::move(name)), w_(Tensor::Full({size}, 2.f)), log_(log) {}
  Tensor Forward(const Tensor& x) override {
    x_ = x;
    return Scaled(x, w_.value().data()[0]);
  }
  Tensor Backward(const Tensor& dy) override { return BackwardWith(dy, BackwardArgs()); }
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    for (int64_t i = 0; i < dy.numel(); ++i) w_.grad().data()[0] += dy.data()[i] * x_.data()[i];
    if (args.on_params_ready) args.on_params_ready();
    // Reads the weight that a too-early update would already have changed.
    log_.push_back(name_ + " input gradient, w = " + std::to_string(w_.value().data()[0]));
    return Scaled(dy, w_.value().data()[0]);
  }
  std::vector<NamedParameter> Parameters() override { return {{name_ + ".w", &w_}}; }
  std::string Name() const override { return name_; }

 private:
  static Tensor Scaled(const Tensor& x, float by) {
    Tensor y = Tensor::Empty(x.shape(), x.device());
    for (int64_t i = 0; i < x.numel(); ++i) y.data()[i] = x.data()[i] * by;
    return y;
  }
  std::string name_;
  Parameter w_;
  Tensor x_;
  std::vector<std::string>& log_;
};

// A bucket's all-reduce is issued as soon as its layer's gradient is queued,
// before the layer's input gradient; its per-bucket update only after the
// layer's Backward has returned (so the input gradient still read the old
// weight) and after its all-reduce; buckets in order. The updates' exact
// place among later layers depends on when each all-reduce finishes.
TEST(ReducerTest, AllReduceStartsAtGradientsUpdateAfterTheLayer) {
  ThreadGroup group(2);
  std::vector<std::vector<std::string>> logs(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::string>& log = logs[r];
      LoggingComm comm(group.communicator(r), log);
      Sequential model("net");
      model.Emplace<EarlyNotifyingScale>("a", 3, log);
      model.Emplace<EarlyNotifyingScale>("b", 5, log);
      ReducerOptions options;
      options.bucket_bytes = 4;  // one bucket per layer
      Reducer reducer(model, comm, options);
      Sgd sgd(model.Parameters(), {0.5f});
      reducer.RegisterCommHook(std::make_unique<LoggingUpdateHook>(sgd, log));
      model.Forward(Tensor::Full({2, 1}, 1.f));
      log.clear();
      reducer.Backward(Tensor::Full({2, 1}, 1.f));
      EXPECT_EQ(sgd.steps(), 1);
    });
  }
  for (std::thread& t : threads) t.join();
  // Bucket 0 holds b (5 elements), bucket 1 holds a (3).
  for (const std::vector<std::string>& log : logs) {
    auto at = [&](const std::string& entry) {
      return std::find(log.begin(), log.end(), entry) - log.begin();
    };
    ASSERT_EQ(log.size(), 6u) << ::testing::PrintToString(log);
    EXPECT_EQ(log[0], "all-reduce 5");
    EXPECT_EQ(log[1], "b input gradient, w = 2.000000");
    EXPECT_LT(at("all-reduce 3"), at("a input gradient, w = 2.000000"));
    EXPECT_GT(at("update 0"), at("b input gradient, w = 2.000000"));
    EXPECT_GT(at("update 1"), at("a input gradient, w = 2.000000"));
    EXPECT_LT(at("update 0"), at("update 1"));
  }
}

// A model that is a tree: an embedding, a residual block whose body holds
// two LayerNorms and two Linears, a head. Every parameter is its own bucket.
// Each layer, however deep, is reported as its gradients are queued: the
// LayerNorm in the middle of the block has its gradients reducing before the
// block's first Linear has returned, and the embedding (backward's last
// layer, whose input is data) before its own Backward has.
TEST(ReducerTest, LayersAtAnyDepthStartReducingAsTheirGradientsAreQueued) {
  ThreadGroup group(2);
  std::vector<std::vector<std::string>> logs(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::string>& log = logs[r];
      LoggingComm comm(group.communicator(r), log);
      Rng rng(3);
      Sequential model("net");
      model.Emplace<Embedding>("emb", 6, 4, rng, Device::Cpu());
      auto body = std::make_unique<Sequential>("body");
      body->Emplace<LayerNorm>("ln1", 8, Device::Cpu());
      body->Emplace<Linear>("fc1", 8, 8, rng, LinearOptions{Activation::kTanh});
      body->Emplace<LayerNorm>("ln2", 8, Device::Cpu());
      body->Emplace<Linear>("fc2", 8, 8, rng);
      model.Emplace<Residual>("block", std::move(body));
      model.Emplace<Linear>("head", 8, 3, rng);
      ReducerOptions options;
      options.bucket_bytes = 4;  // one bucket per parameter
      Reducer reducer(model, comm, options);
      LayerHooks logged;  // the caller's hooks hear what the reducer hears
      logged.on_backward_done = [&log](Layer& layer) { log.push_back("done " + layer.Name()); };
      SoftmaxCrossEntropyLoss loss;
      loss.Forward(model.Forward(Tensor::FromVector({0, 5, 2, 3, 1, 1}, {3, 2})),
                   Tensor::FromVector({0, 2, 1}, {3}), 6);
      log.clear();
      BackwardArgs args = BackwardArgs::For(Device::Cpu());
      args.input_grad = false;
      args.hooks = &logged;
      reducer.BackwardWith(loss.Backward(), args);
      EXPECT_EQ(reducer.BucketParameterNames(5), std::vector<std::string>{"block.ln2.weight"});
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::vector<std::string>& log : logs) {
    auto at = [&](const std::string& entry) {
      return std::find(log.begin(), log.end(), entry) - log.begin();
    };
    auto reductions_before = [&](const std::string& entry) {
      return std::count_if(log.begin(), log.begin() + at(entry), [](const std::string& e) {
        return e.rfind("all-reduce", 0) == 0;
      });
    };
    const std::string printed = ::testing::PrintToString(log);
    ASSERT_LT(at("done emb"), static_cast<std::ptrdiff_t>(log.size())) << printed;
    // Buckets 0-5: head's, fc2's and ln2's parameters.
    EXPECT_EQ(reductions_before("done ln2"), 6) << printed;
    EXPECT_EQ(reductions_before("done fc1"), 8) << printed;
    EXPECT_EQ(reductions_before("done block"), 10) << printed;
    EXPECT_EQ(reductions_before("done emb"), 11) << printed;
    EXPECT_LT(at("done fc1"), at("done ln1")) << printed;
  }
}

// ---------------------------------------------------------------------------
// BFloat16CompressionHook

// One rank's gradients in one step of the dp_training MLP on its shard of a
// global batch of 10: `local` before any reduction (sync off), `reduced`
// after the reducer's Backward with `hook`.
struct StepGradients {
  std::vector<float> local;
  std::vector<float> reduced;
};

std::vector<float> Gradients(Layer& model) {
  std::vector<float> all;
  for (NamedParameter& p : model.Parameters()) {
    const std::vector<float> g = p.grad().ToVector();
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

std::vector<StepGradients> OneStep(int n, const std::function<std::unique_ptr<CommHook>()>& hook) {
  ThreadGroup group(n);
  std::vector<StepGradients> result(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = group.communicator(r);
      Rng init(100 + r);  // the reducer broadcasts rank 0's
      auto model = Mlp({6, 8, 5, 3}, Activation::kTanh, init);
      ReducerOptions options;
      options.bucket_bytes = 256;  // several buckets
      Reducer reducer(*model, comm, options);
      if (hook) reducer.RegisterCommHook(hook());
      const int64_t batch = 10;
      Rng data(7);
      std::vector<float> x(batch * 6), y(batch);
      for (float& v : x) v = data.Normal();
      for (float& v : y) v = static_cast<float>(data.UniformInt(3));
      const ShardRange shard = Shard(batch, r, n);
      Tensor xs = Tensor::FromVector(
          std::vector<float>(x.begin() + shard.begin * 6, x.begin() + shard.end * 6),
          {shard.size(), 6});
      Tensor ys = Tensor::FromVector(
          std::vector<float>(y.begin() + shard.begin, y.begin() + shard.end), {shard.size()});
      SoftmaxCrossEntropyLoss loss;
      for (bool sync : {false, true}) {
        for (NamedParameter& p : model->Parameters()) ops::Fill(p.grad(), 0.f);
        loss.Forward(model->Forward(xs), ys, batch);
        reducer.Backward(loss.Backward(),
                         sync ? GradientSync::kReduce : GradientSync::kAccumulateLocally);
        (sync ? result[r].reduced : result[r].local) = Gradients(*model);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return result;
}

std::unique_ptr<CommHook> Compression() { return std::make_unique<BFloat16CompressionHook>(); }

// Every rank's gradient is rounded to bfloat16 (the cast), the ranks' values
// are summed in float32 in rank order and the sum rounded once
// (ThreadCommunicator), and cast back: so the reduced gradient is exactly
// that, on every rank.
TEST(ReducerTest, BFloat16CompressionIsTheRoundedSumOfRoundedGradients) {
  for (int n = 2; n <= 4; ++n) {
    const std::vector<StepGradients> ranks = OneStep(n, Compression);
    const size_t size = ranks[0].local.size();
    std::vector<float> expected(size);
    int64_t rounded = 0;
    for (size_t i = 0; i < size; ++i) {
      float sum = 0.f;
      float exact = 0.f;
      for (int r = 0; r < n; ++r) {
        sum += RoundToBFloat16(ranks[r].local[i]);
        exact += ranks[r].local[i];
      }
      expected[i] = RoundToBFloat16(sum);
      rounded += expected[i] != exact;
    }
    EXPECT_GT(rounded, 0) << "N=" << n << ": no gradient needed rounding; the test shows nothing";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ranks[r].reduced, expected) << "N=" << n << ", rank " << r;
    }
  }
}

// N workers with compression against one worker on the global batch (which
// reduces, and so rounds, nothing). Rounding to nearest bfloat16 (8
// significant bits) is off by at most 2^-8 relative. Per element, with A =
// sum_r |g_r| over the ranks' local gradients: rounding each g_r moves the
// sum by at most 2^-8 A; rounding the sum, by at most 2^-8 |sum| <= 2^-8 A
// (1 + 2^-8) (the float32 additions add about N 2^-24 A); so 2^-7 (1 +
// 2^-7) A in all. Per-shard against global-batch backward differs in
// float32 rounding only, bounded like WorkersEqualOneWorkerOnTheGlobalBatch's
// 1e-5 relative. Where the ranks' gradients share a sign, A = |g|: 2^-7
// relative, 2^-8 of it the rounding of the reduced gradient.
TEST(ReducerTest, BFloat16CompressionIsWithinItsRoundingOfOneWorker) {
  const std::vector<float> reference = OneStep(1, nullptr)[0].reduced;
  for (int n = 2; n <= 4; ++n) {
    const std::vector<StepGradients> ranks = OneStep(n, Compression);
    ASSERT_EQ(ranks[0].reduced.size(), reference.size());
    double worst = 0;  // |error| / A
    for (size_t i = 0; i < reference.size(); ++i) {
      double a = 0;
      for (int r = 0; r < n; ++r) a += std::abs(ranks[r].local[i]);
      const double error = std::abs(double(ranks[0].reduced[i]) - reference[i]);
      const double bound = std::ldexp(1.0, -7) * (1 + std::ldexp(1.0, -7)) * a +
                           1e-5 * std::max(a, 1e-3);
      EXPECT_LE(error, bound) << "N=" << n << ", element " << i << ": " << ranks[0].reduced[i]
                              << " vs one worker's " << reference[i] << ", sum |g_r| " << a;
      if (a > 0) worst = std::max(worst, error / a);
    }
    std::cout << "N=" << n << ": max |bf16-reduced - 1 worker| / sum_r |g_r| = " << worst
              << " (bound about 2^-7 = " << std::ldexp(1.0, -7) << ")\n";
  }
}

// Training with compression: replicas bitwise identical, and runs
// reproducible; with one worker nothing is reduced, so compression
// changes nothing; with several it does change the result.
TEST(ReducerTest, BFloat16CompressionKeepsReplicasIdenticalAndReproducible) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    DpSetup setup;
    setup.optimizer = optimizer;
    const std::vector<float> reference = RunThreads(1, setup)[0];
    setup.bf16_allreduce = true;
    EXPECT_EQ(RunThreads(1, setup)[0], reference) << optimizer << ": one worker rounded";
    for (int n = 2; n <= 4; ++n) {
      const auto params = RunThreads(n, setup);
      for (int r = 1; r < n; ++r) {
        EXPECT_EQ(params[r], params[0]) << optimizer << ", N=" << n << ": rank " << r;
      }
      EXPECT_EQ(RunThreads(n, setup)[0], params[0]) << optimizer << ", N=" << n;
      EXPECT_NE(params[0], reference) << optimizer << ", N=" << n << ": nothing was rounded";
      std::cout << optimizer << " N=" << n << ": bf16 all-reduce, max relative difference of the "
                << "parameters to 1 worker " << MaxRelativeDifference(params[0], reference)
                << "\n";
    }
  }
}

TEST(ReducerTest, BFloat16CompressionRefusesWhatItCannotServe) {
  ThreadGroup group(2);
  GradBucket half;
  half.buffer = Tensor::Zeros({4}, Device::Cpu(), DType::kBFloat16);
  half.comm = &group.communicator(0);
  BFloat16CompressionHook hook;
  try {
    hook.Bind({half});
    FAIL() << "a bfloat16 bucket was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compresses float32 gradients, but bucket 0"),
              std::string::npos)
        << e.what();
  }
  // Wrapped in the update hook, the optimizer is checked as before.
  Rng rng(1);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  auto other = Mlp({4, 3, 2}, Activation::kRelu, rng);
  ThreadGroup one(1);
  Reducer reducer(*model, one.communicator(0));
  Sgd wrong(other->Parameters(), SgdParams{});
  try {
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(wrong, Compression()));
    FAIL() << "no error for an optimizer over another model's parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold parameter"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
