#include "layers/loss.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "layers/gradient_check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class LossTest : public DeviceTest {};

TEST_P(LossTest, SoftmaxCrossEntropyGradient) {
  Tensor logits = Tensor::FromVector({0.2f, -1, 3, 0.5f, 0.5f, 2, -2, 1, 0}, {3, 3}, device());
  Tensor labels = Tensor::FromVector({2, 0, 1}, {3}, device());
  SoftmaxCrossEntropyLoss ce;
  EXPECT_LT(CheckLossGradient(ce, logits, labels), 1e-2);
}

TEST_P(LossTest, MseGradientAndValue) {
  Tensor pred = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {3, 2}, device());
  Tensor target = Tensor::FromVector({1, 1, 1, 1, 1, 1}, {3, 2}, device());
  MseLoss mse;
  EXPECT_NEAR(mse.Forward(pred, target).Item(), (0 + 1 + 4 + 9 + 16 + 25) / 6.f, 1e-5);
  // Averaged over 6 examples (a global batch) of 2 features: /12.
  EXPECT_NEAR(mse.Forward(pred, target, 6).Item(), 55.f / 12, 1e-5);
  EXPECT_LT(CheckLossGradient(mse, pred, target), 1e-2);
}

TEST_P(LossTest, ExamplesSetsTheNormalizer) {
  Tensor logits = Tensor::FromVector({1, 2, 3, 0, 0, 0}, {2, 3}, device());
  Tensor labels = Tensor::FromVector({2, 0}, {2}, device());
  SoftmaxCrossEntropyLoss ce;
  const float batch_mean = ce.Forward(logits, labels).Item();
  EXPECT_NEAR(ce.Forward(logits, labels, 8).Item(), batch_mean * 2 / 8, 1e-6);
}

TEST(LossErrorsTest, LabelCountMismatch) {
  SoftmaxCrossEntropyLoss ce;
  EXPECT_THROW(ce.Forward(Tensor::Zeros({2, 3}), Tensor::Zeros({3})), Error);
  EXPECT_THROW(ce.Backward(), Error);
  // A label outside [0, classes) is an error naming it (CPU).
  EXPECT_THROW(ce.Forward(Tensor::Zeros({1, 3}), Tensor::FromVector({3}, {1})), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(LossTest);

}  // namespace
}  // namespace tandem
