#include "layers/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "layers/gradient_check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class ActivationLayerTest : public DeviceTest {};

TEST_P(ActivationLayerTest, Gradients) {
  // Inputs kept away from ReLU's kink at 0, where the derivative jumps.
  Tensor x = Tensor::FromVector({-1.3f, -0.4f, 0.3f, 0.9f, 2.2f, -2.7f}, {2, 3}, device());
  for (auto make : {MakeRelu, MakeGelu, MakeTanh, MakeSigmoid, MakeSilu}) {
    auto layer = make("act");
    EXPECT_LT(CheckLayerGradients(*layer, x), 1e-2) << layer->Describe();
  }
}

TEST_P(ActivationLayerTest, ForwardValues) {
  Tensor x = Tensor::FromVector({-1, 2}, {2}, device());
  EXPECT_EQ(MakeRelu("r")->Forward(x).ToVector(), (std::vector<float>{0, 2}));
  // Against the definitions in double: sigmoid 1 / (1 + e^-x), SiLU x sigmoid(x).
  const std::vector<double> values = {-30, -4.5, -1, 0, 0.25, 3, 30};
  Tensor v = Tensor::FromVector(std::vector<float>(values.begin(), values.end()),
                                {static_cast<int64_t>(values.size())}, device());
  const std::vector<float> sigmoid = MakeSigmoid("s")->Forward(v).ToVector();
  const std::vector<float> silu = MakeSilu("s")->Forward(v).ToVector();
  for (size_t i = 0; i < values.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-values[i]));
    EXPECT_NEAR(sigmoid[i], s, 1e-6 * std::max(1.0, s)) << "sigmoid(" << values[i] << ")";
    EXPECT_NEAR(silu[i], values[i] * s, 1e-6 * std::max(1.0, std::abs(values[i] * s)))
        << "silu(" << values[i] << ")";
  }
  EXPECT_THROW(MakeRelu("r")->Backward(x), Error);  // before Forward
}

INSTANTIATE_DEVICE_TEST_SUITE_P(ActivationLayerTest);

}  // namespace
}  // namespace tandem
