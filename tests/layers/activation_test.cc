#include "layers/activation.h"

#include <gtest/gtest.h>

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
  for (auto make : {MakeRelu, MakeGelu, MakeTanh}) {
    auto layer = make("act");
    EXPECT_LT(CheckLayerGradients(*layer, x), 1e-2) << layer->Describe();
  }
}

TEST_P(ActivationLayerTest, ForwardValues) {
  Tensor x = Tensor::FromVector({-1, 2}, {2}, device());
  EXPECT_EQ(MakeRelu("r")->Forward(x).ToVector(), (std::vector<float>{0, 2}));
  EXPECT_THROW(MakeRelu("r")->Backward(x), Error);  // before Forward
}

INSTANTIATE_DEVICE_TEST_SUITE_P(ActivationLayerTest);

}  // namespace
}  // namespace tandem
