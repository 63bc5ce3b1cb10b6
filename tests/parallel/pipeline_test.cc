// The pipeline on CPU threads: GPipe training equals single-device training
// on the whole batch (2 and 3 stages, 1 to 5 micro-batches, uneven ones
// included), composed with data parallelism too; runs are bitwise
// reproducible; stages ask for input gradients per call; a failing stage
// stops the step instead of hanging it; busy time comes from the CPU
// backend's host-clock events, the code path GPUs use with device events.
#include "parallel/pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/backend_registry.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/dropout.h"
#include "layers/layer.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/residual.h"
#include "layers/sequential.h"
#include "tests/support/dp_training.h"

namespace tandem {
namespace {

using testing::MaxRelativeDifference;

struct TrainSetup {
  std::vector<int64_t> sizes = {6, 16, 12, 10, 3};  // 4 Linear layers
  int steps = 4;
  int64_t batch = 12;  // 5 micro-batches: 3, 3, 2, 2, 2 examples
  std::string optimizer = "sgd";
  float dropout = 0.f;
  // Instead of the MLP: fc1, two Residual blocks of a Linear and a Dropout
  // (the Dropouts nested two deep), fc2.
  bool residual_dropout = false;
  // Instead of the MLP: three stages given whole (ModelOfStages): two
  // towers summed (a container of the test's own), a Residual block of a
  // Linear and a Dropout of rate `dropout` (none at 0), a Linear head.
  bool given_as_stages = false;
};

// y = a(x) + b(x): a container that lists its two towers and implements
// only the simple Backward.
class TwoTowers : public Layer {
 public:
  TwoTowers(std::string name, std::unique_ptr<Layer> a, std::unique_ptr<Layer> b)
      : name_(std::move(name)), a_(std::move(a)), b_(std::move(b)) {}
  Tensor Forward(const Tensor& x) override {
    const Tensor ya = a_->Forward(x), yb = b_->Forward(x);
    Tensor y = Tensor::Empty(ya.shape(), ya.device());
    ops::Add(ya, yb, y);
    return y;
  }
  Tensor Backward(const Tensor& dy) override {
    const Tensor da = a_->Backward(dy), db = b_->Backward(dy);
    Tensor dx = Tensor::Empty(da.shape(), da.device());
    ops::Add(da, db, dx);
    return dx;
  }
  std::vector<Layer*> Children() override { return {a_.get(), b_.get()}; }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  std::unique_ptr<Layer> a_, b_;
};

std::unique_ptr<Sequential> StagesModel(const TrainSetup& setup, uint64_t seed) {
  Rng rng(seed);
  const int64_t in = setup.sizes.front(), width = 16, out = setup.sizes.back();
  std::vector<std::unique_ptr<Layer>> stages;
  stages.push_back(std::make_unique<TwoTowers>(
      "towers", std::make_unique<Linear>("a", in, width, rng, LinearOptions{Activation::kTanh}),
      std::make_unique<Linear>("b", in, width, rng, LinearOptions{Activation::kRelu})));
  auto body = std::make_unique<Sequential>("body");
  body->Emplace<Linear>("fc", width, width, rng, LinearOptions{Activation::kTanh});
  if (setup.dropout > 0.f) body->Emplace<Dropout>("drop", setup.dropout, /*seed=*/9);
  stages.push_back(std::make_unique<Residual>("block", std::move(body)));
  stages.push_back(std::make_unique<Linear>("head", width, out, rng));
  return ModelOfStages(std::move(stages), "staged");
}

std::unique_ptr<Sequential> ResidualDropoutModel(const TrainSetup& setup, uint64_t seed) {
  Rng rng(seed);
  const int64_t in = setup.sizes.front(), width = 16, out = setup.sizes.back();
  auto model = std::make_unique<Sequential>("residual_dropout");
  model->Emplace<Linear>("fc1", in, width, rng, LinearOptions{Activation::kTanh});
  for (int b = 1; b <= 2; ++b) {
    auto body = std::make_unique<Sequential>("body");
    body->Emplace<Linear>("fc", width, width, rng, LinearOptions{Activation::kTanh});
    body->Emplace<Dropout>("drop", 0.25f, /*seed=*/7 + b);
    model->Emplace<Residual>("block" + std::to_string(b), std::move(body));
  }
  model->Emplace<Linear>("fc2", width, out, rng);
  return model;
}

std::unique_ptr<Sequential> MakeModel(const TrainSetup& setup, uint64_t seed) {
  if (setup.residual_dropout) return ResidualDropoutModel(setup, seed);
  if (setup.given_as_stages) return StagesModel(setup, seed);
  Rng rng(seed);
  MlpOptions options;
  options.dropout = setup.dropout;
  options.dropout_seed = 7;
  return Mlp(setup.sizes, Activation::kTanh, rng, options);
}

OptimizerConfig Config(const TrainSetup& setup) {
  OptimizerConfig config;
  config.name = setup.optimizer;
  // AdamW moves every parameter by about lr per step whatever the size of
  // its gradient, so a rounding difference in a tiny gradient shows up at
  // full size in a parameter near zero; a smaller lr keeps that below the
  // 1e-5 bar (MaxRelativeDifference's floor is 1e-3).
  config.lr = setup.optimizer == "adamw" ? 0.01f : 0.05f;
  config.momentum = 0.9f;
  return config;
}

// The global batch of step `step`: x [batch, in], labels [batch].
std::pair<Tensor, Tensor> Batch(const TrainSetup& setup, int step) {
  Rng data(1000 + step);
  const int64_t in = setup.sizes.front();
  std::vector<float> x(setup.batch * in), y(setup.batch);
  for (float& v : x) v = data.Normal();
  for (float& v : y) v = static_cast<float>(data.UniformInt(setup.sizes.back()));
  return {Tensor::FromVector(x, {setup.batch, in}), Tensor::FromVector(y, {setup.batch})};
}

std::vector<float> Flatten(const std::vector<NamedParameter>& params) {
  std::vector<float> flat;
  for (const NamedParameter& p : params) {
    const std::vector<float> v = p.value().ToVector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

struct Result {
  std::vector<std::vector<float>> params;  // per replica
  std::vector<float> losses;               // per step
};

Result TrainSingleDevice(const TrainSetup& setup) {
  auto model = MakeModel(setup, 100);
  auto optimizer = MakeOptimizer(Config(setup), model->Parameters());
  SoftmaxCrossEntropyLoss loss;
  Result result;
  for (int step = 0; step < setup.steps; ++step) {
    auto [x, y] = Batch(setup, step);
    optimizer->ZeroGrad();
    Tensor l = loss.Forward(model->Forward(x), y);
    model->Backward(loss.Backward());
    optimizer->Step();
    result.losses.push_back(l.Item());
  }
  result.params.push_back(Flatten(model->Parameters()));
  return result;
}

Result TrainPipeline(const TrainSetup& setup, int stages, int micro_batches,
                     int replicas = 1, std::vector<size_t> boundaries = {},
                     const std::function<void(Sequential&)>& adjust = nullptr) {
  std::vector<std::unique_ptr<Sequential>> models;
  // Replica-dependent init on purpose: replica 0's parameters must be
  // broadcast to the others.
  for (int r = 0; r < replicas; ++r) {
    models.push_back(MakeModel(setup, 100 + r));
    if (adjust) adjust(*models.back());
  }
  PipelineOptions options;
  options.stages = stages;
  options.micro_batches = micro_batches;
  options.boundaries = boundaries;
  options.optimizer = Config(setup);
  options.reducer.bucket_bytes = 256;  // several buckets per stage
  Pipeline pipeline(std::move(models), options);
  Result result;
  for (int step = 0; step < setup.steps; ++step) {
    auto [x, y] = Batch(setup, step);
    pipeline.Step(x, y);
    result.losses.push_back(pipeline.LastLoss());
  }
  for (int r = 0; r < replicas; ++r) result.params.push_back(Flatten(pipeline.Parameters(r)));
  return result;
}

TEST(PipelineTest, BalanceStagesMinimisesTheLargestStage) {
  Rng rng(0);
  // Parameters per layer: 40, 72, 72, 36.
  auto model = Mlp({4, 8, 8, 8, 4}, Activation::kRelu, rng);
  EXPECT_EQ(BalanceStages(*model, 1), std::vector<size_t>{});
  EXPECT_EQ(BalanceStages(*model, 2), (std::vector<size_t>{2}));     // 112 | 108
  EXPECT_EQ(BalanceStages(*model, 3), (std::vector<size_t>{1, 2}));  // 40 | 72 | 108
  EXPECT_EQ(BalanceStages(*model, 4), (std::vector<size_t>{1, 2, 3}));
  try {
    BalanceStages(*model, 5);
    ADD_FAILURE() << "5 stages of 4 layers did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too few for 5 stages"), std::string::npos) << e.what();
  }
}

TEST(PipelineTest, GpipeBubbleModel) {
  EXPECT_DOUBLE_EQ(GpipeBubbleFraction(2, 1), 0.5);
  EXPECT_DOUBLE_EQ(GpipeBubbleFraction(2, 4), 0.2);
  EXPECT_DOUBLE_EQ(GpipeBubbleFraction(4, 13), 0.1875);
  EXPECT_DOUBLE_EQ(GpipeBubbleFraction(1, 8), 0.0);
}

// The acceptance test: pipeline training equals single-device
// training. Micro-batch sizes may be uneven (12 examples in 5 micro-batches).
TEST(PipelineTest, EqualsSingleDeviceTraining) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    TrainSetup setup;
    setup.optimizer = optimizer;
    const Result reference = TrainSingleDevice(setup);
    for (int stages : {2, 3}) {
      for (int micro : {1, 2, 4, 5}) {
        const Result result = TrainPipeline(setup, stages, micro);
        const double diff = MaxRelativeDifference(result.params[0], reference.params[0]);
        std::cout << optimizer << " stages=" << stages << " micro_batches=" << micro
                  << ": max relative difference to single-device " << diff << "\n";
        EXPECT_LE(diff, 1e-5) << optimizer << " stages=" << stages << " micro=" << micro;
        EXPECT_LE(MaxRelativeDifference(result.losses, reference.losses), 1e-5)
            << "loss, " << optimizer << " stages=" << stages << " micro=" << micro;
      }
    }
  }
}

// Explicit boundaries: an unbalanced 1 | 3 split trains the same model.
TEST(PipelineTest, ExplicitBoundaries) {
  TrainSetup setup;
  const Result reference = TrainSingleDevice(setup);
  const Result result = TrainPipeline(setup, 2, 3, 1, {1});
  EXPECT_LE(MaxRelativeDifference(result.params[0], reference.params[0]), 1e-5);
}

// Records what each backward call asked of it; the identity otherwise.
class ProbeLayer final : public Layer {
 public:
  explicit ProbeLayer(std::string name) : name_(std::move(name)) {}
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override {
    ++simple_calls;
    return dy;
  }
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    input_grad_asked.push_back(args.input_grad);
    return args.input_grad ? dy : Tensor();
  }
  std::string Name() const override { return name_; }

  std::vector<bool> input_grad_asked;  // per BackwardWith call
  int simple_calls = 0;

 private:
  std::string name_;
};

// p0 fc1 | p1 fc2 fc3: a probe first in each of two stages.
std::unique_ptr<Sequential> ProbedModel(uint64_t seed) {
  Rng rng(seed);
  auto model = std::make_unique<Sequential>("probed");
  model->Emplace<ProbeLayer>("p0");
  model->Emplace<Linear>("fc1", 6, 16, rng, LinearOptions{Activation::kTanh});
  model->Emplace<ProbeLayer>("p1");
  model->Emplace<Linear>("fc2", 16, 12, rng, LinearOptions{Activation::kTanh});
  model->Emplace<Linear>("fc3", 12, 3, rng);
  return model;
}

// Whether a stage's first layer computes its input gradient is asked per
// call (BackwardArgs::input_grad): never for the first stage, whose input is
// data, always for later stages, whose input gradient the stage before
// needs. The training result is unchanged.
TEST(PipelineTest, InputGradientIsAskedPerStage) {
  TrainSetup setup;
  auto reference_model = ProbedModel(100);
  auto reference_optimizer = MakeOptimizer(Config(setup), reference_model->Parameters());
  SoftmaxCrossEntropyLoss loss;
  for (int replicas : {1, 2}) {
    std::vector<std::unique_ptr<Sequential>> models;
    for (int r = 0; r < replicas; ++r) models.push_back(ProbedModel(100 + r));
    auto& p0 = static_cast<ProbeLayer&>(models[0]->layer(0));
    auto& p1 = static_cast<ProbeLayer&>(models[0]->layer(2));
    PipelineOptions options;
    options.stages = 2;
    options.micro_batches = 3;
    options.boundaries = {2};
    options.optimizer = Config(setup);
    Pipeline pipeline(std::move(models), options);
    for (int step = 0; step < setup.steps; ++step) {
      auto [x, y] = Batch(setup, step);
      pipeline.Step(x, y);
      // The single-device reference, trained once (in the first pass) and
      // compared with both: replica 0's parameters are broadcast, so the
      // replicated run trains the same model.
      if (replicas == 1) {
        reference_optimizer->ZeroGrad();
        loss.Forward(reference_model->Forward(x), y);
        reference_model->Backward(loss.Backward());
        reference_optimizer->Step();
      }
    }
    const size_t calls = static_cast<size_t>(setup.steps) * options.micro_batches;
    EXPECT_EQ(p0.input_grad_asked, std::vector<bool>(calls, false)) << "replicas=" << replicas;
    EXPECT_EQ(p1.input_grad_asked, std::vector<bool>(calls, true)) << "replicas=" << replicas;
    EXPECT_EQ(p0.simple_calls + p1.simple_calls, 0);
    EXPECT_LE(MaxRelativeDifference(Flatten(pipeline.Parameters(0)),
                                    Flatten(reference_model->Parameters())),
              1e-5)
        << "replicas=" << replicas;
  }
}

// Note [Recompute]: Dropout's mask counter is rewound for the recomputed
// forward, so masks match the single-device run's element for element.
TEST(PipelineTest, DropoutRecomputeDrawsTheSameMasks) {
  TrainSetup setup;
  setup.dropout = 0.25f;  // fc1 drop1 fc2 drop2 fc3 drop3 fc4
  const Result reference = TrainSingleDevice(setup);
  for (int micro : {1, 3, 4}) {
    const Result result = TrainPipeline(setup, 3, micro);
    const double diff = MaxRelativeDifference(result.params[0], reference.params[0]);
    std::cout << "dropout 3 stages micro_batches=" << micro << ": " << diff << "\n";
    EXPECT_LE(diff, 1e-5) << "micro=" << micro;
  }
}

// The same for Dropouts inside Residual blocks: the stage finds them
// through the layer tree (Layer::State), not among its top-level layers.
TEST(PipelineTest, NestedDropoutRecomputeDrawsTheSameMasks) {
  TrainSetup setup;
  setup.residual_dropout = true;  // fc1 block1(fc drop) block2(fc drop) fc2
  const Result reference = TrainSingleDevice(setup);
  for (auto [stages, micro] : {std::pair<int, int>{2, 3}, {3, 4}, {4, 5}}) {
    const Result result = TrainPipeline(setup, stages, micro);
    const double diff = MaxRelativeDifference(result.params[0], reference.params[0]);
    std::cout << "nested dropout " << stages << " stages micro_batches=" << micro << ": " << diff
              << "\n";
    EXPECT_LE(diff, 1e-5) << "stages=" << stages << " micro=" << micro;
  }
}

// A model given as its stages, each any layer (a container of the test's
// own, a Residual around a Dropout, a Linear): each stage whole on its own
// device equals one device; without the Dropout (whose masks follow the
// shard) also beside a replica.
TEST(PipelineTest, TrainsAModelGivenAsItsStages) {
  for (auto [replicas, micro] : {std::pair<int, int>{1, 4}, {2, 3}}) {
    TrainSetup setup;
    setup.given_as_stages = true;
    setup.dropout = replicas == 1 ? 0.25f : 0.f;
    const Result reference = TrainSingleDevice(setup);
    const Result result = TrainPipeline(setup, 3, micro, replicas);
    const double diff = MaxRelativeDifference(result.params[0], reference.params[0]);
    std::cout << "given as stages, replicas=" << replicas << " micro_batches=" << micro << ": "
              << diff << "\n";
    EXPECT_LE(diff, 1e-5) << "replicas=" << replicas << " micro=" << micro;
    EXPECT_LE(MaxRelativeDifference(result.losses, reference.losses), 1e-5);
  }
  TrainSetup setup;
  setup.given_as_stages = true;
  auto model = MakeModel(setup, 0);
  EXPECT_EQ(BalanceStages(*model, 3), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(model->Parameters()[0].name, "towers.a.weight");
}

// Pipeline x data parallelism: 2 stages x 2 replicas (4 threads), and
// 2 x 3, equal one device on the global batch; replicas stay identical.
TEST(PipelineTest, ComposesWithDataParallelism) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    TrainSetup setup;
    setup.optimizer = optimizer;
    const Result reference = TrainSingleDevice(setup);
    for (auto [stages, replicas, micro] : {std::tuple<int, int, int>{2, 2, 2},
                                           {2, 2, 3}, {3, 2, 2}, {2, 3, 4}}) {
      const Result result = TrainPipeline(setup, stages, micro, replicas);
      const double diff = MaxRelativeDifference(result.params[0], reference.params[0]);
      std::cout << optimizer << " stages=" << stages << " replicas=" << replicas
                << " micro_batches=" << micro << ": max relative difference " << diff << "\n";
      EXPECT_LE(diff, 1e-5);
      EXPECT_LE(MaxRelativeDifference(result.losses, reference.losses), 1e-5);
      for (int r = 1; r < replicas; ++r) {
        EXPECT_EQ(result.params[r], result.params[0]) << "replica " << r << " diverged";
      }
    }
  }
}

TEST(PipelineTest, BitwiseReproducible) {
  TrainSetup setup;
  for (auto [stages, replicas] : {std::pair<int, int>{3, 1}, {2, 2}}) {
    const Result first = TrainPipeline(setup, stages, 4, replicas);
    const Result second = TrainPipeline(setup, stages, 4, replicas);
    ASSERT_EQ(first.params[0].size(), second.params[0].size());
    EXPECT_EQ(0, std::memcmp(first.params[0].data(), second.params[0].data(),
                             first.params[0].size() * sizeof(float)))
        << "stages=" << stages << " replicas=" << replicas;
    EXPECT_EQ(first.losses, second.losses);
  }
}

// A stage that throws (the last one, on a bad label) aborts the others, which
// wait for its gradients; Step reports the failing stage, not the aborts.
TEST(PipelineTest, FailingStageAbortsTheStep) {
  for (int replicas : {1, 2}) {
    TrainSetup setup;
    PipelineOptions options;
    options.stages = 3;
    options.micro_batches = 2;
    std::vector<std::unique_ptr<Sequential>> models;
    for (int r = 0; r < replicas; ++r) models.push_back(MakeModel(setup, 100));
    Pipeline pipeline(std::move(models), options);
    auto [x, y] = Batch(setup, 0);
    std::vector<float> labels = y.ToVector();
    labels.back() = 7.f;  // 3 classes; the last replica's last micro-batch
    const Tensor bad = Tensor::FromVector(labels, {setup.batch});
    const auto start = std::chrono::steady_clock::now();
    try {
      pipeline.Step(x, bad);
      ADD_FAILURE() << "a bad label did not fail the step";
    } catch (const Error& e) {
      const std::string text = e.what();
      std::cout << "replicas=" << replicas << ": " << text << "\n";
      const std::string who =
          "pipeline stage 2 of replica " + std::to_string(replicas - 1) + " (cpu) failed";
      EXPECT_NE(text.find(who), std::string::npos) << text;
      EXPECT_NE(text.find("label 7"), std::string::npos) << text;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    try {
      pipeline.Step(x, y);
      ADD_FAILURE() << "a broken pipeline took another step";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("an earlier step failed"), std::string::npos)
          << e.what();
    }
  }
}

// Identity, but its first Forward takes `stall` (a stage stuck in its own
// code, not throwing).
class StallLayer final : public Layer {
 public:
  explicit StallLayer(std::chrono::milliseconds stall) : stall_(stall) {}
  Tensor Forward(const Tensor& x) override {
    if (!stalled_) {
      stalled_ = true;
      std::this_thread::sleep_for(stall_);
    }
    return x;
  }
  Tensor Backward(const Tensor& dy) override { return dy; }
  std::string Name() const override { return "stall"; }

 private:
  const std::chrono::milliseconds stall_;
  bool stalled_ = false;
};

// A stage that stops without throwing: its neighbour's hand-off deadline
// ends the step, naming the hand-off and the micro-batch, and Step waits for
// the stuck stage no longer than another deadline.
TEST(PipelineTest, StuckStageEndsTheStepAtTheHandoffDeadline) {
  const auto stall = std::chrono::milliseconds(2000);
  Rng rng(3);
  std::vector<std::unique_ptr<Sequential>> models;
  models.push_back(std::make_unique<Sequential>("stuck"));
  models[0]->Emplace<Linear>("fc1", 6, 16, rng, LinearOptions{Activation::kTanh});
  models[0]->Emplace<StallLayer>(stall);
  models[0]->Emplace<Linear>("fc2", 16, 3, rng);
  PipelineOptions options;
  options.stages = 2;
  options.micro_batches = 2;
  options.boundaries = {1};  // stage 1: stall, fc2
  options.handoff_timeout = std::chrono::milliseconds(200);
  Pipeline pipeline(std::move(models), options);
  TrainSetup setup;
  setup.sizes = {6, 3};
  auto [x, y] = Batch(setup, 0);
  const auto start = std::chrono::steady_clock::now();
  try {
    pipeline.Step(x, y);
    ADD_FAILURE() << "a stuck stage did not fail the step";
  } catch (const Error& e) {
    const std::string text = e.what();
    std::cout << text << "\n";
    EXPECT_NE(text.find("stage 0 -> 1"), std::string::npos) << text;
    EXPECT_NE(text.find("micro-batch"), std::string::npos) << text;
    EXPECT_NE(text.find("did not arrive within 0.2 s"), std::string::npos) << text;
    EXPECT_NE(text.find("1 stage thread(s) did not stop"), std::string::npos) << text;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, stall / 2);
  // The stuck stage comes back before the pipeline goes, and is joined.
  std::this_thread::sleep_for(stall);
}

TEST(PipelineTest, ClearErrors) {
  TrainSetup setup;
  auto expect_error = [&](PipelineOptions options, const std::string& expected) {
    try {
      Pipeline pipeline(MakeModel(setup, 1), options);
      ADD_FAILURE() << "no error, expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  PipelineOptions options;
  options.stages = 5;
  expect_error(options, "has 4 layer(s), too few for 5 stages");
  options.stages = 2;
  options.boundaries = {4};
  expect_error(options, "stage boundary 4 must be greater than 0 and less than the model's 4");
  options.boundaries = {1, 2};
  expect_error(options, "2 boundaries for 2 stages");
  options.boundaries = {};
  options.devices = {Device::Cpu()};
  expect_error(options, "1 device(s) for 2 stage(s) x 1 replica(s): expected 2");
  if (CudaDeviceCount() < 8) {
    options.devices = {Device::Cpu(), Device::Cuda(7)};
    expect_error(options, "stage 1 of replica 0 is on cuda:7 but");
  }
  // A failure while the stages set up fails the constructor, naming the
  // stage.
  options.devices = {};
  options.make_loss = [] { return std::unique_ptr<Loss>(); };
  expect_error(options, "pipeline stage 1 of replica 0 (cpu) failed: "
                        "pipeline: PipelineOptions::make_loss returned null");

  // Every micro-batch needs an example.
  PipelineOptions ok;
  ok.micro_batches = 8;
  Pipeline pipeline(MakeModel(setup, 1), ok);
  TrainSetup small = setup;
  small.batch = 5;
  auto [x, y] = Batch(small, 0);
  try {
    pipeline.Step(x, y);
    ADD_FAILURE() << "5 examples in 8 micro-batches did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than micro_batches=8"), std::string::npos)
        << e.what();
  }
}

TEST(PipelineTest, RecordsBusyTimePerStage) {
  TrainSetup setup;
  setup.sizes = {64, 256, 256, 256, 10};
  setup.batch = 64;
  PipelineOptions options;
  options.micro_batches = 4;
  options.record_timing = true;
  Pipeline pipeline(MakeModel(setup, 1), options);
  auto [x, y] = Batch(setup, 0);
  const auto start = std::chrono::steady_clock::now();
  pipeline.Step(x, y);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> busy = pipeline.LastBusySeconds();
  ASSERT_EQ(busy.size(), 2u);
  for (double b : busy) {
    EXPECT_GT(b, 0.0);
    EXPECT_LE(b, wall);
  }
  std::cout << "busy " << busy[0] << " s, " << busy[1] << " s of " << wall << " s\n";
  try {
    pipeline.LastBusySeconds(1);
    ADD_FAILURE() << "busy time of replica 1 of 1 did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replica 1, but there are 1"), std::string::npos)
        << e.what();
  }
}

TEST(PipelineTest, BusyTimeNeedsRecordTiming) {
  TrainSetup setup;
  Pipeline pipeline(MakeModel(setup, 1), PipelineOptions());
  auto [x, y] = Batch(setup, 0);
  pipeline.Step(x, y);
  try {
    pipeline.LastBusySeconds();
    ADD_FAILURE() << "LastBusySeconds without record_timing did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs PipelineOptions::record_timing"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
