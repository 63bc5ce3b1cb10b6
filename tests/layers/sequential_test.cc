#include "layers/sequential.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "tests/support/device_test.h"
#include "tests/support/gradient_check.h"

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
  EXPECT_LT(testing::CheckLayerGradients(model, x), 1e-2);

  std::vector<size_t> order;
  model.Forward(x);
  model.Backward(Tensor::Zeros({2, 3}, device()), [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));
}

// Logs its Backward's steps; says its gradients are queued midway if `early`.
class NoticeLogger : public Layer {
 public:
  NoticeLogger(std::string name, bool early, std::vector<std::string>& log)
      : name_(std::move(name)), early_(early), log_(log) {}
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override {
    log_.push_back(name_ + " gradients");
    if (early_) NotifyGradientsQueued();
    if (early_) NotifyGradientsQueued();  // a second call says nothing
    log_.push_back(name_ + " input gradient");
    return dy;
  }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  bool early_;
  std::vector<std::string>& log_;
};

TEST(SequentialHooksTest, GradientsQueuedWhereTheLayerSaysElseOnReturn) {
  std::vector<std::string> log;
  Sequential model("net");
  model.Emplace<NoticeLogger>("late", false, log);
  model.Emplace<NoticeLogger>("early", true, log);
  model.Forward(Tensor::Zeros({1, 1}));
  Sequential::BackwardHooks hooks;
  hooks.on_gradients_queued = [&](size_t i) { log.push_back("queued " + std::to_string(i)); };
  hooks.on_layer_done = [&](size_t i) { log.push_back("done " + std::to_string(i)); };
  model.Backward(Tensor::Zeros({1, 1}), hooks);
  EXPECT_EQ(log, (std::vector<std::string>{
                     "early gradients", "queued 1", "early input gradient", "done 1",
                     "late gradients", "late input gradient", "queued 0", "done 0"}));
  // Outside Sequential's hooks the notice reaches nobody.
  log.clear();
  model.Backward(Tensor::Zeros({1, 1}));
  EXPECT_EQ(log, (std::vector<std::string>{"early gradients", "early input gradient",
                                           "late gradients", "late input gradient"}));
}

// A custom layer with a parameter that only knows how to accumulate.
class AccumulateOnly : public Layer {
 public:
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override { return dy; }
  std::vector<Parameter> Parameters() override { return {{"s", &s_, &ds_}}; }
  std::string Name() const override { return "scale"; }

 private:
  Tensor s_ = Tensor::Zeros({1}), ds_ = Tensor::Zeros({1});
};

TEST(SequentialGradTargetTest, AllOrNothing) {
  Rng rng(0);
  Sequential model("net");
  model.Emplace<Linear>("fc1", 2, 2, rng);
  model.Add(MakeTanh("act"));
  ASSERT_TRUE(model.SetGradTarget(GradTarget::Overwrite()));
  EXPECT_EQ(model.layer(0).grad_target().kind, GradTarget::kOverwrite);
  // A layer that cannot overwrite is refused while the model overwrites...
  EXPECT_THROW(model.Add(std::make_unique<AccumulateOnly>()), Error);
  ASSERT_TRUE(model.SetGradTarget(GradTarget::Accumulate()));
  model.Add(std::make_unique<AccumulateOnly>());
  // ...and once it is in, no layer switches.
  EXPECT_FALSE(model.SetGradTarget(GradTarget::ApplySgd(0.1f)));
  EXPECT_EQ(model.grad_target().kind, GradTarget::kAccumulate);
  EXPECT_EQ(model.layer(0).grad_target().kind, GradTarget::kAccumulate);
}

TEST(SequentialGradientsFirstTest, ReachesNestedLayers) {
  Rng rng(0);
  Sequential model("net");
  model.Emplace<Linear>("fc1", 2, 2, rng);
  Sequential& inner = model.Emplace<Sequential>("inner");
  inner.Emplace<Linear>("fc2", 2, 2, rng);
  model.SetGradientsFirst(true);
  EXPECT_TRUE(model.layer(0).gradients_first());
  EXPECT_TRUE(inner.layer(0).gradients_first());
  inner.SetGradientsFirst(false);
  EXPECT_TRUE(model.layer(0).gradients_first());
  EXPECT_FALSE(inner.layer(0).gradients_first());
}

TEST(SequentialNamesTest, ParameterNamesAndUniqueness) {
  Rng rng(0);
  Sequential model;
  model.Emplace<Linear>("fc1", 2, 2, rng);
  model.Emplace<Linear>("fc2", 2, 1, rng);
  std::vector<std::string> names;
  for (const Parameter& p : model.Parameters()) names.push_back(p.name);
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
