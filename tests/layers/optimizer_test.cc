#include "layers/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class OptimizerTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped()) return;
    value_ = Tensor::FromVector({1, -2}, {2}, device());
    grad_ = Tensor::FromVector({0.5f, 0.25f}, {2}, device());
  }
  std::vector<Parameter> Params() { return {{"w", &value_, &grad_}}; }
  Tensor value_, grad_;
};

TEST_P(OptimizerTest, SgdMomentumTwoStepsByHand) {
  SgdParams p;
  p.lr = 0.1f;
  p.momentum = 0.9f;
  Sgd sgd(Params(), p);
  sgd.Step();  // v = g; w -= 0.1 g
  sgd.Step();  // v = 0.9 g + g = 1.9 g; w -= 0.19 g
  const std::vector<float> w = value_.ToVector();
  EXPECT_NEAR(w[0], 1 - 0.29f * 0.5f, 1e-6);
  EXPECT_NEAR(w[1], -2 - 0.29f * 0.25f, 1e-6);
  EXPECT_EQ(sgd.steps(), 2);
  EXPECT_EQ(sgd.State().size(), 1u);
  sgd.ZeroGrad();
  EXPECT_EQ(grad_.ToVector(), (std::vector<float>{0, 0}));
}

TEST_P(OptimizerTest, AdamWTwoStepsByHand) {
  AdamWParams p;
  p.lr = 0.01f;
  p.weight_decay = 0.f;
  AdamW adam(Params(), p);
  adam.Step();
  adam.Step();
  // With a constant gradient, m_hat = g and v_hat = g^2 at every step, so
  // each step moves each weight by lr * sign(g) (up to eps).
  const std::vector<float> w = value_.ToVector();
  EXPECT_NEAR(w[0], 1 - 0.02f, 1e-5);
  EXPECT_NEAR(w[1], -2 - 0.02f, 1e-5);
  EXPECT_EQ(adam.State().size(), 2u);
}

TEST_P(OptimizerTest, ConfigErrorsNameTheFlag) {
  OptimizerConfig c;
  c.name = "adagrad";
  try {
    MakeOptimizer(c, Params());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown optimizer 'adagrad' (--optimizer)"),
              std::string::npos);
  }
  c.name = "sgd";
  c.lr = -1.f;
  try {
    MakeOptimizer(c, Params());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(--lr)"), std::string::npos) << e.what();
  }
  c.lr = 0.1f;
  EXPECT_EQ(MakeOptimizer(c, Params())->Name(), "sgd");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(OptimizerTest);

}  // namespace
}  // namespace tandem
