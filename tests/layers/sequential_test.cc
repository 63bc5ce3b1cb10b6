#include "layers/sequential.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "layers/activation.h"
#include "layers/gradient_check.h"
#include "layers/linear.h"
#include "layers/optimizer.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class SequentialTest : public DeviceTest {};

TEST_P(SequentialTest, GradientsAndLayerDoneOrder) {
  Rng rng(0);
  LinearOptions o;
  o.device = device();
  Sequential model("net");
  model.Emplace<Linear>("fc1", 5, 4, rng, o);
  model.Add(MakeTanh("act1"));
  model.Emplace<Linear>("fc2", 4, 3, rng, o);
  Tensor x = Tensor::FromVector({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 1, 2, -1, 0.5f, 0},
                                {2, 5}, device());
  EXPECT_LT(CheckLayerGradients(model, x), 1e-2);

  std::vector<std::string> order;
  model.Forward(x);
  LayerHooks hooks;
  hooks.on_backward_done = [&](Layer& layer) { order.push_back(layer.Name()); };
  BackwardArgs args = BackwardArgs::For(device());
  args.hooks = &hooks;
  model.BackwardWith(Tensor::Zeros({2, 3}, device()), args);
  EXPECT_EQ(order, (std::vector<std::string>{"fc2", "act1", "fc1"}));
}

// What the parameter lane reads goes back to the allocator a few layers
// later, not at the end of backward: memory in use stops growing with
// depth (on the CPU, one queue, it goes at once). The results are the same
// with the parameter work on one lane.
TEST_P(SequentialTest, BackwardReleasesWhatTheParameterLaneReadAsItGoes) {
  const int64_t width = 256, batch = 64, depth = 8;
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  Rng rng(4), rng_copy(4);
  Sequential model("deep"), copy("deep");
  for (int64_t i = 0; i < depth; ++i) {
    model.Emplace<Linear>("fc" + std::to_string(i), width, width, rng, o);
    copy.Emplace<Linear>("fc" + std::to_string(i), width, width, rng_copy, o);
  }
  Rng data(5);
  std::vector<float> xs(batch * width);
  for (float& v : xs) v = data.Normal();
  const Tensor x = Tensor::FromVector(xs, {batch, width}, device());
  const Tensor dy = Tensor::FromVector(xs, {batch, width}, device());
  Allocator& allocator = GetBackend(device()).allocator();
  std::vector<int64_t> in_use;  // as each layer returns, the last first
  LayerHooks hooks;
  hooks.on_backward_done = [&](Layer&) { in_use.push_back(allocator.stats().bytes_in_use); };
  model.Forward(x);
  BackwardArgs args = BackwardArgs::For(device());
  args.grad_mode = GradMode::kOverwrite;
  args.hooks = &hooks;
  const Tensor dx = model.BackwardWith(dy, args);
  args.hooks = nullptr;
  ASSERT_EQ(in_use.size(), static_cast<size_t>(depth));
  // A layer's input and dz: what it may leave for the parameter lane.
  const int64_t per_layer = 2 * batch * width * static_cast<int64_t>(sizeof(float));
  EXPECT_LE(in_use[depth - 1] - in_use[0], 3 * per_layer)
      << "from the last layer's Backward to the first's, memory in use grew by "
      << in_use[depth - 1] - in_use[0] << " bytes";

  BackwardArgs one_lane = args;
  one_lane.param_lane = one_lane.lane;
  copy.Forward(x);
  EXPECT_EQ(copy.BackwardWith(dy, one_lane).ToVector(), dx.ToVector());
  for (size_t p = 0; p < model.Parameters().size(); ++p) {
    EXPECT_EQ(model.Parameters()[p].grad().ToVector(), copy.Parameters()[p].grad().ToVector())
        << model.Parameters()[p].name;
  }
}

// Logs its Backward's steps. With `early` it implements the full form and
// says midway that its parameter gradients are queued; otherwise only the
// simple form, which the default adapter serves.
class NoticeLogger : public Layer {
 public:
  NoticeLogger(std::string name, bool early, std::vector<std::string>& log)
      : name_(std::move(name)), early_(early), log_(log) {}
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override {
    log_.push_back(name_ + " gradients");
    log_.push_back(name_ + " input gradient");
    return dy;
  }
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override {
    if (!early_) return Layer::BackwardWith(dy, args);
    log_.push_back(name_ + " gradients");
    if (args.on_params_ready) args.on_params_ready();
    log_.push_back(name_ + " input gradient");
    return dy;
  }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  bool early_;
  std::vector<std::string>& log_;
};

TEST(SequentialHooksTest, ParamsReadyWhereTheLayerSaysElseOnReturn) {
  std::vector<std::string> log;
  Sequential model("net");
  model.Emplace<NoticeLogger>("late", false, log);
  model.Emplace<NoticeLogger>("early", true, log);
  model.Forward(Tensor::Zeros({1, 1}));
  LayerHooks hooks;
  hooks.on_params_ready = [&](Layer& layer) { log.push_back("ready " + layer.Name()); };
  hooks.on_backward_done = [&](Layer& layer) { log.push_back("done " + layer.Name()); };
  BackwardArgs args = BackwardArgs::For(Device::Cpu());
  args.hooks = &hooks;
  model.BackwardWith(Tensor::Zeros({1, 1}), args);
  EXPECT_EQ(log, (std::vector<std::string>{
                     "early gradients", "ready early", "early input gradient", "done early",
                     "late gradients", "late input gradient", "ready late", "done late"}));
}

// The prepare hook changes one layer's arguments: here the first layer's
// parameter work goes to the main lane, and it alone is asked for no input
// gradient when the caller asks for none.
TEST(SequentialHooksTest, PrepareSeesEachLayersArguments) {
  Rng rng(0);
  Sequential model("net");
  model.Emplace<Linear>("fc1", 3, 2, rng);
  model.Emplace<Linear>("fc2", 2, 2, rng);
  model.Forward(Tensor::Full({4, 3}, 1.f));
  BackwardArgs args = BackwardArgs::For(Device::Cpu());
  args.input_grad = false;
  std::vector<std::string> seen;
  LayerHooks hooks;
  hooks.prepare_backward = [&](Layer& layer, BackwardArgs& layer_args) {
    seen.push_back(layer.Name() + (layer_args.input_grad ? " dx" : " no dx"));
    if (layer.Name() == "fc1") layer_args.param_lane = layer_args.lane;
  };
  args.hooks = &hooks;
  EXPECT_FALSE(model.BackwardWith(Tensor::Full({4, 2}, 1.f), args).defined());
  EXPECT_EQ(seen, (std::vector<std::string>{"fc2 dx", "fc1 no dx"}));
}

// A custom layer with a parameter that implements only the simple form: the
// default adapter gives it overwrite mode and in-backward updates.
class ScaleLayer : public Layer {
 public:
  Tensor Forward(const Tensor& x) override {
    x_ = x;
    Tensor y = Tensor::Empty(x.shape(), x.device());
    ops::Mul(x, s_.value(), y);
    return y;
  }
  Tensor Backward(const Tensor& dy) override {  // adds into ds, like any layer
    Tensor g = Tensor::Empty(dy.shape(), dy.device());
    ops::Mul(dy, x_, g);
    ops::Axpy(1.f, g, s_.grad());
    Tensor dx = Tensor::Empty(dy.shape(), dy.device());
    ops::Mul(dy, s_.value(), dx);
    return dx;
  }
  std::vector<NamedParameter> Parameters() override { return {{"s", &s_}}; }
  std::string Name() const override { return "scale"; }

 private:
  Parameter s_{Tensor::Full({1, 2}, 2.f)};
  Tensor x_;
};

TEST(DefaultBackwardTest, OverwriteAndUpdateThroughTheSimpleForm) {
  ScaleLayer layer;
  const Tensor x = Tensor::FromVector({1.f, 3.f}, {1, 2});
  const Tensor dy = Tensor::FromVector({1.f, 1.f}, {1, 2});
  BackwardArgs overwrite = BackwardArgs::For(Device::Cpu());
  overwrite.grad_mode = GradMode::kOverwrite;
  for (int i = 0; i < 2; ++i) {
    layer.Forward(x);
    EXPECT_EQ(layer.BackwardWith(dy, overwrite).ToVector(), (std::vector<float>{2.f, 2.f}));
  }
  EXPECT_EQ(layer.Parameters()[0].grad().ToVector(), (std::vector<float>{1.f, 3.f}));
  SgdParams plain;
  plain.lr = 0.5f;
  Sgd sgd(layer.Parameters(), plain);
  BackwardArgs update = BackwardArgs::For(Device::Cpu());
  update.update = sgd.in_backward();
  int ready = 0;
  update.on_params_ready = [&ready] { ++ready; };
  layer.Forward(x);
  layer.BackwardWith(dy, update);
  sgd.Step();
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(layer.Parameters()[0].value().ToVector(), (std::vector<float>{1.5f, 0.5f}));
}

TEST(SequentialNamesTest, ParameterNamesAndUniqueness) {
  Rng rng(0);
  Sequential model;
  model.Emplace<Linear>("fc1", 2, 2, rng);
  model.Emplace<Linear>("fc2", 2, 1, rng);
  std::vector<std::string> names;
  for (const NamedParameter& p : model.Parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight",
                                             "fc2.bias"}));
  EXPECT_THROW(model.Emplace<Linear>("fc1", 1, 1, rng), Error);
  model.SetTraining(false);
  EXPECT_FALSE(model.layer(0).training());
}

TEST(SequentialNamesTest, ShapeMismatchBetweenLayersNamesTheLayer) {
  Rng rng(0);
  Sequential model;
  model.Emplace<Linear>("fc1", 4, 8, rng);
  model.Emplace<Linear>("fc2", 6, 2, rng);
  try {
    model.Forward(Tensor::Zeros({3, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'fc2' (Linear 6→2) got input [3, 8]"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_DEVICE_TEST_SUITE_P(SequentialTest);

}  // namespace
}  // namespace tandem
