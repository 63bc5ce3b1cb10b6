// The reducer in threads mode: N workers equal one worker on the global
// batch; runs are bitwise reproducible; all-reduce overlaps backward.
#include "parallel/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
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
// Step: bitwise the same parameters, with accumulation and on one worker too.
TEST(ReducerTest, PerBucketUpdateEqualsStepBitwise) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    for (int micro_steps : {1, 2}) {
      for (int n : {1, 3}) {
        DpSetup setup;
        setup.optimizer = optimizer;
        setup.micro_steps = micro_steps;
        const auto stepped = RunThreads(n, setup);
        setup.per_bucket_update = true;
        const auto per_bucket = RunThreads(n, setup);
        EXPECT_EQ(per_bucket[0], stepped[0])
            << optimizer << ", " << micro_steps << " micro-steps, " << n << " workers";
        // The update really moved the parameters (not both left unchanged).
        setup.steps = 0;
        EXPECT_NE(RunThreads(n, setup)[0], per_bucket[0]) << optimizer;
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
  std::vector<Parameter> some = model->Parameters();
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
  std::vector<Parameter> Parameters() override { return {{name_ + ".w", &w_, &dw_}}; }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  std::vector<std::string>& seen_;
  Tensor w_ = Tensor::Zeros({1}), dw_ = Tensor::Zeros({1});
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
    if (std::string(c.kind) == "AllReduce") {
      log_.push_back("all-reduce " + std::to_string(c.count));
      return inner_.AllReduce(c.data, c.count, c.op);
    }
    return inner_.Broadcast(c.data, c.count, c.root);
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
      : name_(std::move(name)), w_(Tensor::Full({size}, 2.f)),
        dw_(Tensor::Zeros({size})), log_(log) {}
  Tensor Forward(const Tensor& x) override {
    x_ = x;
    return Scaled(x, w_.data()[0]);
  }
  Tensor Backward(const Tensor& dy) override { return BackwardWith(dy, BackwardArgs()); }
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    for (int64_t i = 0; i < dy.numel(); ++i) dw_.data()[0] += dy.data()[i] * x_.data()[i];
    if (args.on_params_ready) args.on_params_ready();
    // Reads the weight that a too-early update would already have changed.
    log_.push_back(name_ + " input gradient, w = " + std::to_string(w_.data()[0]));
    return Scaled(dy, w_.data()[0]);
  }
  std::vector<Parameter> Parameters() override { return {{name_ + ".w", &w_, &dw_}}; }
  std::string Name() const override { return name_; }

 private:
  static Tensor Scaled(const Tensor& x, float by) {
    Tensor y = Tensor::Empty(x.shape(), x.device());
    for (int64_t i = 0; i < x.numel(); ++i) y.data()[i] = x.data()[i] * by;
    return y;
  }
  std::string name_;
  Tensor w_, dw_, x_;
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

}  // namespace
}  // namespace tandem
