#include "layers/mlp.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "layers/gradient_check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class MlpTest : public DeviceTest {};

TEST_P(MlpTest, StructureAndGradients) {
  Rng rng(3);
  MlpOptions o;
  o.device = device();
  auto model = Mlp({6, 5, 4, 3}, Activation::kGelu, rng, o);
  EXPECT_EQ(model->Describe(),
            "mlp (Sequential: fc1 (Linear 6→5, gelu), fc2 (Linear 5→4, gelu), "
            "fc3 (Linear 4→3))");
  EXPECT_EQ(ParameterCount(*model), 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
  Rng data(4);
  std::vector<float> v(2 * 6);
  for (float& x : v) x = data.Normal();
  EXPECT_LT(CheckLayerGradients(*model, Tensor::FromVector(v, {2, 6}, device())),
            1e-2);
}

// An MLP's input is usually data: with input_grad = false the first layer
// skips its input gradient, and the parameter gradients are those of a
// backward that computes it.
TEST_P(MlpTest, InputGradientOnRequestOnly) {
  MlpOptions o;
  o.device = device();
  Rng rng_a(5), rng_b(5);
  auto skipping = Mlp({6, 5, 3}, Activation::kRelu, rng_a, o);
  auto full = Mlp({6, 5, 3}, Activation::kRelu, rng_b, o);
  Rng data(6);
  std::vector<float> xv(4 * 6), dyv(4 * 3);
  for (float& v : xv) v = data.Normal();
  for (float& v : dyv) v = data.Normal();
  const Tensor x = Tensor::FromVector(xv, {4, 6}, device());
  const Tensor dy = Tensor::FromVector(dyv, {4, 3}, device());
  ZeroGrad(*skipping);
  ZeroGrad(*full);
  skipping->Forward(x);
  full->Forward(x);
  BackwardArgs no_input = BackwardArgs::For(device());
  no_input.input_grad = false;
  EXPECT_FALSE(skipping->BackwardWith(dy, no_input).defined());
  EXPECT_EQ(full->Backward(dy).shape(), x.shape());
  auto a = skipping->Parameters(), b = full->Parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].grad().ToVector(), b[i].grad().ToVector()) << a[i].name;
  }
}

TEST(MlpConfigTest, DropoutLayersAndErrors) {
  Rng rng(0);
  MlpOptions o;
  o.dropout = 0.1f;
  auto model = Mlp({4, 3, 2}, Activation::kRelu, rng, o);
  EXPECT_EQ(model->size(), 3u);
  EXPECT_EQ(model->layer(1).Name(), "drop1");
  EXPECT_THROW(Mlp({4}, Activation::kRelu, rng), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(MlpTest);

}  // namespace
}  // namespace tandem
