#include "layers/mlp.h"

#include <gtest/gtest.h>

#include "core/check.h"
#include "tests/support/device_test.h"
#include "tests/support/gradient_check.h"

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
  EXPECT_LT(testing::CheckLayerGradients(*model, Tensor::FromVector(v, {2, 6}, device())),
            1e-2);
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
