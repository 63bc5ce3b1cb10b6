// The reducer in threads mode: N workers equal one worker on the global
// batch; runs are bitwise reproducible; all-reduce overlaps backward.
#include "parallel/reducer.h"

#include <gtest/gtest.h>

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
    reducer.set_optimizer(&wrong);
    FAIL() << "no error for an optimizer over another model's parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold parameter"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(wrong.updates_handed_off());
  ReducerOptions negative;
  negative.gemm_reserve = -1;
  try {
    Reducer bad(*model, group.communicator(0), negative);
    FAIL() << "a negative gemm_reserve was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_reserve is -1"), std::string::npos) << e.what();
  }
  Sgd right(model->Parameters(), SgdParams{});
  reducer.set_optimizer(&right);
  EXPECT_TRUE(right.updates_handed_off());
  reducer.set_optimizer(nullptr);
  EXPECT_FALSE(right.updates_handed_off());
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

// ReducerOptions::gradients_first_layers: the first N layers with parameters
// get the hint, layers without are skipped, and the reducer takes it back
// when it goes. One rank, or no overlap, needs no hint.
TEST(ReducerTest, GradientsFirstGoesToTheLayersNearestTheInput) {
  auto hinted = [](int ranks, ReducerOptions options) {
    ThreadGroup group(ranks);
    std::vector<std::string> during(ranks), after(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        Rng rng(2);
        Sequential model("net");
        model.Add(MakeTanh("act0"));
        model.Emplace<Linear>("fc1", 3, 3, rng);
        model.Add(MakeTanh("act1"));
        model.Emplace<Linear>("fc2", 3, 3, rng);
        model.Emplace<Linear>("fc3", 3, 2, rng);
        auto names = [&] {
          std::string s;
          for (size_t i = 0; i < model.size(); ++i) {
            if (model.layer(i).gradients_first()) s += model.layer(i).Name() + " ";
          }
          return s;
        };
        {
          Reducer reducer(model, group.communicator(r), options);
          during[r] = names();
        }
        after[r] = names();
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(after[r], "") << "rank " << r;
    return during[0];
  };
  ReducerOptions options;
  EXPECT_EQ(options.gradients_first_layers, 2);
  EXPECT_EQ(hinted(2, options), "fc1 fc2 ");
  options.gradients_first_layers = 1;
  EXPECT_EQ(hinted(2, options), "fc1 ");
  options.gradients_first_layers = 9;
  EXPECT_EQ(hinted(2, options), "fc1 fc2 fc3 ");
  options.gradients_first_layers = 0;
  EXPECT_EQ(hinted(2, options), "");
  options.gradients_first_layers = 2;
  EXPECT_EQ(hinted(1, options), "");
  options.overlap = false;
  EXPECT_EQ(hinted(2, options), "");
  // A hint the model already had stays after the reducer goes.
  {
    ThreadGroup group(2);
    std::vector<std::thread> threads;
    std::vector<int> kept(2, 0);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        Rng rng(2);
        auto model = Mlp({3, 3, 3, 2}, Activation::kRelu, rng);
        model->layer(0).SetGradientsFirst(true);
        { Reducer reducer(*model, group.communicator(r), ReducerOptions()); }
        kept[r] = model->layer(0).gradients_first() && !model->layer(1).gradients_first();
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(kept, (std::vector<int>{1, 1}));
  }
  options.gradients_first_layers = -1;
  ThreadGroup one(1);
  Rng rng(0);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  EXPECT_THROW(Reducer(*model, one.communicator(0), options), Error);
}

// Fused SGD keeps no gradients, so there is nothing to all-reduce: two
// workers get an error naming the way out, one worker trains as usual.
TEST(ReducerTest, FusedSgdWithSeveralWorkersIsAnError) {
  ThreadGroup group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Rng rng(1);
      auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
      Sgd sgd(model->Parameters(), SgdParams{0.1f});
      ASSERT_TRUE(sgd.FuseIntoBackward(*model));
      Reducer reducer(*model, group.communicator(r), ReducerOptions());
      MseLoss loss;
      loss.Forward(model->Forward(Tensor::Full({2, 4}, 0.5f)), Tensor::Zeros({2, 2}));
      try {
        reducer.Backward(loss.Backward());
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("applies SGD inside Backward (Sgd::FuseIntoBackward)"), std::string::npos)
        << e;
  }
  ThreadGroup one(1);
  Rng rng(1);
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng);
  Sgd sgd(model->Parameters(), SgdParams{0.1f});
  ASSERT_TRUE(sgd.FuseIntoBackward(*model));
  Reducer reducer(*model, one.communicator(0), ReducerOptions());
  MseLoss loss;
  loss.Forward(model->Forward(Tensor::Full({2, 4}, 0.5f)), Tensor::Zeros({2, 2}));
  EXPECT_NO_THROW(reducer.Backward(loss.Backward()));
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

// A stream-ordered communicator on the CPU: a ThreadCommunicator that says
// it queues, and writes down what the reducer asks of it.
class LoggingQueuedComm : public Communicator {
 public:
  LoggingQueuedComm(Communicator& inner, std::vector<std::string>& log)
      : inner_(inner), log_(log) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void AllReduce(float* data, int64_t count, ReduceOp op) override {
    inner_.AllReduce(data, count, op);
  }
  void Broadcast(float* data, int64_t count, int root) override {
    inner_.Broadcast(data, count, root);
  }
  void Barrier() override { inner_.Barrier(); }
  void AllGather(const float* send, int64_t count, float* recv) override {
    inner_.AllGather(send, count, recv);
  }
  std::string Describe() const override { return "logging " + inner_.Describe(); }
  void Abort(const std::string& reason) override { inner_.Abort(reason); }
  bool supports_queued() const override { return true; }
  void QueueAllReduce(float* data, int64_t count, ReduceOp op) override {
    log_.push_back("all-reduce " + std::to_string(count));
    inner_.AllReduce(data, count, op);
  }
  void RunQueued(const std::function<void()>& work) override {
    log_.push_back("update");
    work();
  }

 private:
  Communicator& inner_;
  std::vector<std::string>& log_;
};

// y = x * w, with w of `size` elements (only w[0] is used); says its
// gradient is done before it computes the input gradient, as Linear does.
class EarlyNotifyingScale : public Layer {
 public:
  EarlyNotifyingScale(std::string name, int64_t size, std::vector<std::string>& log)
      : name_(std::move(name)), w_(Tensor::Full({size}, 2.f)),
        dw_(Tensor::Zeros({size})), log_(log) {}
  Tensor Forward(const Tensor& x) override {
    x_ = x;
    return Scaled(x, w_.data()[0]);
  }
  Tensor Backward(const Tensor& dy) override {
    for (int64_t i = 0; i < dy.numel(); ++i) dw_.data()[0] += dy.data()[i] * x_.data()[i];
    NotifyGradientsQueued();
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

// A bucket's all-reduce is queued as soon as its layer's gradients are, before
// the layer's input gradient; its per-bucket update only after the layer's
// Backward has returned, so the input gradient still read the old weight.
TEST(ReducerTest, AllReduceStartsAtGradientsUpdateAfterTheLayer) {
  ThreadGroup group(2);
  std::vector<std::vector<std::string>> logs(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::string>& log = logs[r];
      LoggingQueuedComm comm(group.communicator(r), log);
      Sequential model("net");
      model.Emplace<EarlyNotifyingScale>("a", 3, log);
      model.Emplace<EarlyNotifyingScale>("b", 5, log);
      ReducerOptions options;
      options.bucket_bytes = 4;  // one bucket per layer
      Reducer reducer(model, comm, options);
      Sgd sgd(model.Parameters(), {0.5f});
      reducer.set_optimizer(&sgd);
      model.Forward(Tensor::Full({2, 1}, 1.f));
      log.clear();
      reducer.Backward(Tensor::Full({2, 1}, 1.f));
    });
  }
  for (std::thread& t : threads) t.join();
  // Bucket 0 holds b (5 elements), bucket 1 holds a (3).
  const std::vector<std::string> expected = {
      "all-reduce 5", "b input gradient, w = 2.000000", "update",
      "all-reduce 3", "a input gradient, w = 2.000000", "update"};
  EXPECT_EQ(logs[0], expected);
  EXPECT_EQ(logs[1], expected);
}

}  // namespace
}  // namespace tandem
