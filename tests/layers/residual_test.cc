// Residual: hand values, finite-difference gradients, CPU/CUDA parity, the
// names of wrapped parameters, the training mode reaching a layer inside,
// the caller's BackwardArgs reaching the inner layer, and data-parallel
// training equal to one worker's.
#include "layers/residual.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/gradient_check.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"
#include "parallel/thread_communicator.h"
#include "tests/support/device_test.h"
#include "tests/support/dp_training.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
using testing::ErrorText;

Tensor RandomInput(int64_t rows, int64_t cols, uint64_t seed, Device device) {
  Rng rng(seed);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = rng.Normal();
  return Tensor::FromVector(v, {rows, cols}, device);
}

std::unique_ptr<Linear> MakeLinear(const std::string& name, int64_t in, int64_t out,
                                   Activation act, Rng& rng, Device device) {
  LinearOptions o;
  o.activation = act;
  o.device = device;
  return std::make_unique<Linear>(name, in, out, rng, o);
}

// fc1 (relu) -> drop -> fc2, around a skip connection, twice, then a head:
// the shape of a residual MLP.
std::unique_ptr<Sequential> ResidualMlp(uint64_t seed, Device device, float p = 0.f) {
  Rng rng(seed);
  auto model = std::make_unique<Sequential>("model");
  for (const char* block : {"block1", "block2"}) {
    auto body = std::make_unique<Sequential>("body");
    body->Add(MakeLinear("fc1", 6, 8, Activation::kRelu, rng, device));
    body->Emplace<Dropout>("drop", p, /*seed=*/7);
    body->Add(MakeLinear("fc2", 8, 6, Activation::kIdentity, rng, device));
    model->Emplace<Residual>(block, std::move(body));
  }
  model->Add(MakeLinear("head", 6, 3, Activation::kIdentity, rng, device));
  return model;
}

class ResidualTest : public DeviceTest {};

TEST_P(ResidualTest, ForwardIsInputPlusInner) {
  Rng rng(0);
  Residual block("block", MakeLinear("fc", 2, 2, Activation::kRelu, rng, device()));
  auto& fc = static_cast<Linear&>(block.inner());
  fc.weight().CopyFrom(Tensor::FromVector({1, 2, -1, 0}, {2, 2}));
  fc.bias().CopyFrom(Tensor::FromVector({0.5f, 0}, {2}));
  Tensor x = Tensor::FromVector({1, -1, 2, 3}, {2, 2}, device());
  // fc(x) = relu([1-2+0.5, -1], [2+6+0.5, -2]) = [0, 0], [8.5, 0]
  Tensor y = block.Forward(x);
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1, -1, 10.5f, 3}));
  // The sum is a new tensor: neither x nor the inner output is written.
  EXPECT_FALSE(y.SharesStorageWith(x));
  EXPECT_EQ(x.ToVector(), (std::vector<float>{1, -1, 2, 3}));
}

TEST_P(ResidualTest, GradientsEveryActivationAndASequentialBody) {
  for (Activation act : kActivations) {
    Rng rng(1);
    Residual block("block", MakeLinear("fc", 5, 5, act, rng, device()));
    EXPECT_LT(CheckLayerGradients(block, RandomInput(4, 5, 2, device())), 1e-2)
        << ActivationName(act);
  }
  auto model = ResidualMlp(3, device());
  EXPECT_LT(CheckLayerGradients(*model, RandomInput(4, 6, 4, device())), 1e-2);
}

// One model on the CPU and one on device(), from one seed: the same outputs,
// input gradients and parameter gradients.
TEST_P(ResidualTest, DeviceMatchesCpu) {
  auto cpu = ResidualMlp(5, Device::Cpu());
  auto dev = ResidualMlp(5, device());
  const Tensor x = RandomInput(7, 6, 6, Device::Cpu());
  const Tensor dy = RandomInput(7, 3, 8, Device::Cpu());
  const std::vector<float> y_cpu = cpu->Forward(x).ToVector();
  const std::vector<float> y_dev = dev->Forward(x.To(device())).ToVector();
  const std::vector<float> dx_cpu = cpu->Backward(dy).ToVector();
  const std::vector<float> dx_dev = dev->Backward(dy.To(device())).ToVector();
  EXPECT_LT(testing::MaxRelativeDifference(y_dev, y_cpu), 1e-4);
  EXPECT_LT(testing::MaxRelativeDifference(dx_dev, dx_cpu), 1e-4);
  std::vector<NamedParameter> pc = cpu->Parameters(), pd = dev->Parameters();
  ASSERT_EQ(pc.size(), pd.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    // Weight gradients sum over the batch in cuBLAS's order, not the CPU's.
    EXPECT_LT(testing::MaxRelativeDifference(pd[i].grad().ToVector(), pc[i].grad().ToVector()),
              2e-3)
        << pc[i].name;
  }
}

// The caller's arguments reach the inner layer: on_params_ready once,
// overwritten gradients, no input gradient when none is wanted.
TEST_P(ResidualTest, BackwardWithPassesTheArgumentsIn) {
  Rng rng(9);
  Residual block("block", MakeLinear("fc", 4, 4, Activation::kTanh, rng, device()));
  const Tensor x = RandomInput(3, 4, 10, device());
  const Tensor dy = RandomInput(3, 4, 11, device());
  block.Forward(x);
  const std::vector<float> dx = block.Backward(dy).ToVector();
  const std::vector<float> dw = block.Parameters()[0].grad().ToVector();

  BackwardArgs args = BackwardArgs::For(device());
  args.grad_mode = GradMode::kOverwrite;
  int ready = 0;
  args.on_params_ready = [&] { ++ready; };
  // A GEMM with beta 0 may take another algorithm on a GPU: a tolerance.
  auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    return testing::MaxRelativeDifference(a, b) < 1e-5;
  };
  block.Forward(x);
  EXPECT_TRUE(close(block.BackwardWith(dy, args).ToVector(), dx));
  ops::WaitFor(args.lane, args.param_lane);
  EXPECT_EQ(ready, 1);
  EXPECT_TRUE(close(block.Parameters()[0].grad().ToVector(), dw));  // not 2 dw

  args.input_grad = false;
  block.Forward(x);
  EXPECT_FALSE(block.BackwardWith(dy, args).defined());
  ops::WaitFor(args.lane, args.param_lane);
  EXPECT_EQ(ready, 2);
  EXPECT_TRUE(close(block.Parameters()[0].grad().ToVector(), dw));
}

TEST_P(ResidualTest, ErrorsNameTheLayerAndShapes) {
  Rng rng(0);
  Residual block("block1", MakeLinear("fc", 4, 3, Activation::kIdentity, rng, device()));
  const std::string text = ErrorText([&] { block.Forward(Tensor::Zeros({2, 4}, device())); });
  EXPECT_NE(text.find("layer 'block1' (Residual) got input [2, 4] but its inner layer fc "
                      "(Linear 4→3) returned [2, 3]"),
            std::string::npos)
      << text;
  Residual square("block2", MakeLinear("fc", 4, 4, Activation::kIdentity, rng, device()));
  EXPECT_NE(ErrorText([&] { square.Backward(Tensor::Zeros({2, 4}, device())); })
                .find("Backward without a Forward"),
            std::string::npos);
  square.Forward(Tensor::Zeros({2, 4}, device()));
  EXPECT_NE(ErrorText([&] { square.Backward(Tensor::Zeros({2, 3}, device())); })
                .find("layer 'block2' (Residual) got output gradient [2, 3]: expected [2, 4]"),
            std::string::npos);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(ResidualTest);

std::vector<std::string> Names(Layer& layer) {
  std::vector<std::string> names;
  for (const NamedParameter& p : layer.Parameters()) names.push_back(p.name);
  return names;
}

TEST(ResidualNamesTest, WrappedParametersArePrefixed) {
  Rng rng(0);
  Residual single("block1", MakeLinear("fc", 2, 2, Activation::kRelu, rng, Device::Cpu()));
  EXPECT_EQ(Names(single), (std::vector<std::string>{"block1.fc.weight", "block1.fc.bias"}));

  auto model = ResidualMlp(0, Device::Cpu());
  EXPECT_EQ(Names(*model), (std::vector<std::string>{
                               "block1.fc1.weight", "block1.fc1.bias", "block1.fc2.weight",
                               "block1.fc2.bias", "block2.fc1.weight", "block2.fc1.bias",
                               "block2.fc2.weight", "block2.fc2.bias", "head.weight",
                               "head.bias"}));

  Residual outer("outer", std::make_unique<Residual>(
                              "inner", MakeLinear("fc", 2, 2, Activation::kIdentity, rng,
                                                  Device::Cpu())));
  EXPECT_EQ(Names(outer)[0], "outer.inner.fc.weight");
}

// Two Sequential blocks add no prefix: the same names inside both are
// caught when the second is added, naming both layers.
TEST(ResidualNamesTest, SequentialRefusesARepeatedParameterName) {
  Rng rng(0);
  Sequential model("model");
  for (const char* name : {"a", "b"}) {
    auto block = std::make_unique<Sequential>(name);
    block->Add(MakeLinear("fc", 2, 2, Activation::kIdentity, rng, Device::Cpu()));
    if (std::string(name) == "a") {
      model.Add(std::move(block));
      continue;
    }
    const std::string text = ErrorText([&] { model.Add(std::move(block)); });
    EXPECT_NE(text.find("layer b (Sequential: fc (Linear 2→2)) has a parameter or state word "
                        "named 'fc.weight', as layer a (Sequential: fc (Linear 2→2)) already does"),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(model.size(), 1u);
  // Under Residual the same blocks are told apart.
  model.Emplace<Residual>("r", MakeLinear("fc", 2, 2, Activation::kIdentity, rng,
                                          Device::Cpu()));
  EXPECT_EQ(Names(model).back(), "r.fc.bias");
}

// A layer that names two parameters alike.
class TwoAlike : public Layer {
 public:
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override { return dy; }
  std::vector<NamedParameter> Parameters() override {
    return {{"w", &a_}, {"w", &b_}};
  }
  std::string Name() const override { return "alike"; }

 private:
  Parameter a_{Tensor::Zeros({1})};
  Parameter b_{Tensor::Zeros({1})};
};

TEST(ResidualNamesTest, SequentialRefusesALayerWithTwoNamesAlike) {
  Sequential model("model");
  const std::string text = ErrorText([&] { model.Add(std::make_unique<TwoAlike>()); });
  EXPECT_NE(text.find("layer alike has two parameters or state words named 'w'"),
            std::string::npos)
      << text;
}

// model -> block (Residual) -> body (Sequential) -> drop (Dropout): eval
// mode reaches the Dropout, which then passes x through, so y = 2x.
TEST(ResidualModeTest, TrainingModeReachesADropoutInside) {
  auto body = std::make_unique<Sequential>("body");
  Dropout& drop = body->Emplace<Dropout>("drop", 0.5f, /*seed=*/1);
  Sequential model("model");
  model.Emplace<Residual>("block", std::move(body));
  const Tensor x = RandomInput(4, 8, 2, Device::Cpu());
  std::vector<float> twice = x.ToVector();
  for (float& v : twice) v *= 2;

  EXPECT_TRUE(drop.training());
  EXPECT_NE(model.Forward(x).ToVector(), twice);  // dropping
  model.SetTraining(false);
  EXPECT_FALSE(drop.training());
  EXPECT_EQ(model.Forward(x).ToVector(), twice);
  model.SetTraining(true);
  EXPECT_TRUE(drop.training());

  // A block added to a model in eval mode takes that mode too.
  model.SetTraining(false);
  auto late = std::make_unique<Sequential>("late_body");
  Dropout& late_drop = late->Emplace<Dropout>("late_drop", 0.5f, /*seed=*/1);
  model.Emplace<Residual>("late", std::move(late));
  EXPECT_FALSE(late_drop.training());
}

// OnModeChange still runs, after the children have their mode.
class ModeWatcher : public Residual {
 public:
  using Residual::Residual;
  std::vector<bool> seen;

 protected:
  void OnModeChange() override { seen.push_back(inner().training()); }
};

TEST(ResidualModeTest, OnModeChangeSeesTheChildrenInTheNewMode) {
  ModeWatcher watcher("w", std::make_unique<Dropout>("drop", 0.5f, 1));
  watcher.SetTraining(false);
  watcher.SetTraining(true);
  EXPECT_EQ(watcher.seen, (std::vector<bool>{false, true}));
}

// Data parallelism over threads: 2 workers, each on its shard, end with the
// parameters 1 worker reaches on the whole batch.
std::vector<float> TrainResidualMlp(Communicator& comm, int steps) {
  auto model = ResidualMlp(11, Device::Cpu());
  ReducerOptions options;
  options.bucket_bytes = 256;  // several buckets
  Reducer reducer(*model, comm, options);
  OptimizerConfig config;
  config.name = "sgd";
  config.lr = 0.05f;
  auto optimizer = MakeOptimizer(config, model->Parameters());
  SoftmaxCrossEntropyLoss loss;
  const int64_t batch = 10;
  for (int step = 0; step < steps; ++step) {
    optimizer->ZeroGrad();
    Rng data(100 + step);
    std::vector<float> x(batch * 6), y(batch);
    for (float& v : x) v = data.Normal();
    for (float& v : y) v = static_cast<float>(data.UniformInt(3));
    const ShardRange shard = Shard(batch, comm.rank(), comm.size());
    Tensor xs = Tensor::FromVector(
        std::vector<float>(x.begin() + shard.begin * 6, x.begin() + shard.end * 6),
        {shard.size(), 6});
    Tensor ys = Tensor::FromVector(
        std::vector<float>(y.begin() + shard.begin, y.begin() + shard.end), {shard.size()});
    loss.Forward(model->Forward(xs), ys, batch);
    reducer.Backward(loss.Backward());
    optimizer->Step();
  }
  std::vector<float> params;
  for (NamedParameter& p : model->Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    params.insert(params.end(), v.begin(), v.end());
  }
  return params;
}

TEST(ResidualDataParallelTest, TwoWorkersEqualOneOnTheGlobalBatch) {
  ThreadGroup one(1);
  const std::vector<float> reference = TrainResidualMlp(one.communicator(0), 3);
  ThreadGroup two(2);
  std::vector<std::vector<float>> params(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { params[r] = TrainResidualMlp(two.communicator(r), 3); });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<float> init = [] {
    auto model = ResidualMlp(11, Device::Cpu());
    std::vector<float> v;
    for (NamedParameter& p : model->Parameters()) {
      const std::vector<float> pv = p.value().ToVector();
      v.insert(v.end(), pv.begin(), pv.end());
    }
    return v;
  }();
  EXPECT_GT(testing::MaxRelativeDifference(reference, init), 1e-3);  // it trained
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(testing::MaxRelativeDifference(params[r], reference), 1e-4) << "rank " << r;
  }
}

}  // namespace
}  // namespace tandem
