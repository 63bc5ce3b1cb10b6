// The documented extension point: a layer written against the public API
// passes a gradient check on every device and trains inside a model.
#include "examples/custom_layer/low_rank_linear.h"

#include <gtest/gtest.h>

#include "layers/activation.h"
#include "layers/gradient_check.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class CustomLayerTest : public DeviceTest {};

TEST_P(CustomLayerTest, GradientCheck) {
  Rng rng(1);
  example::LowRankLinear layer("low_rank", 6, 5, 2, rng, device());
  std::vector<float> v(3 * 6);
  for (float& x : v) x = rng.Normal();
  EXPECT_LT(CheckLayerGradients(layer, Tensor::FromVector(v, {3, 6}, device())),
            1e-2);
}

// In a float32 model, and in a bf16 one (the head computes in bfloat16; the
// custom layer in float32, casting at its edges).
void TrainsInsideAModel(Device device, Precision precision) {
  Rng rng(7);
  const int64_t n = 256;
  std::vector<float> xs(n * 8), ys(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 8; ++j) xs[i * 8 + j] = rng.Normal();
    ys[i] = static_cast<float>((xs[i * 8] > 0) * 2 + (xs[i * 8 + 1] > 0));
  }
  Tensor x = Tensor::FromVector(xs, {n, 8}, device);
  Tensor y = Tensor::FromVector(ys, {n}, device);
  Sequential model;
  model.Add(std::make_unique<example::LowRankLinear>("low_rank", 8, 32, 4, rng, device));
  model.Add(MakeTanh("act"));
  LinearOptions head;
  head.device = device;
  head.precision = precision;
  model.Emplace<Linear>("head", 32, 4, rng, head);
  AdamWParams adam;
  adam.lr = 0.02f;
  AdamW optimizer(model.Parameters(), adam);
  SoftmaxCrossEntropyLoss loss;
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    optimizer.ZeroGrad();
    last = loss.Forward(model.Forward(x), y).Item();
    if (step == 0) first = last;
    model.Backward(loss.Backward());
    optimizer.Step();
  }
  Tensor correct = Tensor::Empty({1}, device);
  ops::CountCorrect(model.Forward(x), y, correct);
  std::cout << PrecisionName(precision) << ": loss " << first << " -> " << last
            << ", accuracy " << correct.Item() / n << "\n";
  EXPECT_LT(last, 0.1f * first) << PrecisionName(precision);
  EXPECT_GE(correct.Item() / n, 0.97f) << PrecisionName(precision);
}

TEST_P(CustomLayerTest, TrainsInsideAModel) {
  TrainsInsideAModel(device(), Precision::kFp32);
  TrainsInsideAModel(device(), Precision::kBf16);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(CustomLayerTest);

}  // namespace
}  // namespace tandem
