#include "layers/dropout.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "layers/gradient_check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class DropoutTest : public DeviceTest {};

TEST_P(DropoutTest, EvalIsIdentityTrainScales) {
  Tensor x = Tensor::Full({1000}, 2.f, device());
  Dropout drop("drop", 0.5f, 7);
  drop.SetTraining(false);
  EXPECT_EQ(drop.Forward(x).ToVector(), x.ToVector());
  drop.SetTraining(true);
  int zeros = 0;
  for (float v : drop.Forward(x).ToVector()) {
    if (v == 0.f) ++zeros;
    else EXPECT_FLOAT_EQ(v, 4.f);
  }
  EXPECT_NEAR(zeros, 500, 60);
  EXPECT_EQ(drop.offset(), 1000u);
}

TEST_P(DropoutTest, GradientUsesTheSameMask) {
  Dropout drop("drop", 0.3f, 11);
  Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, device());
  GradCheckOptions o;
  o.before_forward = [&] { drop.set_offset(0); };
  EXPECT_LT(CheckLayerGradients(drop, x, o), 1e-2);
}

TEST(DropoutConfigTest, RejectsBadProbability) {
  EXPECT_THROW(Dropout("d", 1.f, 0), Error);
  EXPECT_THROW(Dropout("d", -0.1f, 0), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(DropoutTest);

}  // namespace
}  // namespace tandem
