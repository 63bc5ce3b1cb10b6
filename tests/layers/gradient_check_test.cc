// The finite-difference gradient check itself: it passes a correct layer and
// loss, and names the tensor and the element where a Backward is wrong.
#include "layers/gradient_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/linear.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::ErrorText;

// y = x + w, w [2, 3]. Backward gives dx = dy and dw += dy, except that
// element `wrong` of dw (a flat index, when >= 0) gets `wrong_value`.
class AddWeight : public Layer {
 public:
  explicit AddWeight(int64_t wrong = -1, float wrong_value = 0.f)
      : wrong_(wrong), wrong_value_(wrong_value) {
    w_ = Parameter(Tensor::FromVector({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {2, 3}));
  }
  Tensor Forward(const Tensor& x) override {
    Tensor y = Tensor::Empty(x.shape(), x.device());
    ops::Add(x, w_.value(), y);
    return y;
  }
  Tensor Backward(const Tensor& dy) override {
    const std::vector<float> g = dy.ToVector();
    std::vector<float> dw = w_.grad().ToVector();
    for (size_t i = 0; i < dw.size(); ++i) dw[i] += g[i];
    if (wrong_ >= 0) dw[wrong_] = wrong_value_;
    w_.grad().CopyFrom(Tensor::FromVector(dw, w_.grad().shape()));
    return dy.Clone();
  }
  std::vector<NamedParameter> Parameters() override { return {{"add.w", &w_}}; }
  std::string Name() const override { return "add"; }

 private:
  int64_t wrong_;
  float wrong_value_;
  Parameter w_;
};

Tensor Input() { return Tensor::FromVector({1.f, -2.f, 0.5f, 3.f, -1.f, 2.f}, {2, 3}); }

TEST(GradientCheckTest, PassesACorrectLayer) {
  Rng rng(3);
  Linear layer("fc", 3, 4, rng);
  const GradCheckResult result = CompareLayerGradients(layer, Input());
  ASSERT_EQ(result.tensors.size(), 3u);  // the input, fc.weight, fc.bias
  EXPECT_EQ(result.tensors[0].what, "input of layer 'fc'");
  EXPECT_EQ(result.tensors[1].what, "parameter 'fc.weight'");
  EXPECT_EQ(result.tensors[0].probes, 6);
  EXPECT_LT(result.max_error(), 1e-2) << result.worst();
  EXPECT_NO_THROW(result.Require(1e-2));
  EXPECT_EQ(CheckLayerGradients(layer, Input()), result.max_error());
}

TEST(GradientCheckTest, NamesTheParameterAndItsWorstElement) {
  AddWeight layer(/*wrong=*/4, /*wrong_value=*/5.f);  // element [1, 1]
  const GradCheckResult result = CompareLayerGradients(layer, Input());
  ASSERT_EQ(result.tensors.size(), 2u);
  EXPECT_LT(result.tensors[0].error, 1e-2) << result.tensors[0];  // dx is right
  const TensorGradCheck& worst = result.worst();
  EXPECT_EQ(worst.what, "parameter 'add.w'");
  EXPECT_EQ(worst.worst, 4);
  EXPECT_EQ(worst.analytic, 5.0);
  EXPECT_GT(result.max_error(), 0.5);

  const std::string error = ErrorText([&] { result.Require(1e-2); });
  std::cout << "  Require(1e-2) threw: " << error << "\n";
  for (const char* words : {"gradient check: parameter 'add.w' [2, 3] has relative error",
                            "over the tolerance 0.01", "worst at element [1, 1]",
                            "Backward gave 5,"}) {
    EXPECT_NE(error.find(words), std::string::npos) << "missing '" << words << "' in: " << error;
  }
  EXPECT_THROW(result.Require(1e-2), Error);
  EXPECT_NO_THROW(result.Require(100.0));  // a tolerance is just a bound
}

TEST(GradientCheckTest, ANanGradientFailsWhereverItIs) {
  AddWeight layer(/*wrong=*/2, std::numeric_limits<float>::quiet_NaN());
  const GradCheckResult result = CompareLayerGradients(layer, Input());
  EXPECT_TRUE(std::isnan(result.max_error()));
  EXPECT_EQ(result.worst().what, "parameter 'add.w'");
  EXPECT_EQ(result.worst().worst, 2);
  EXPECT_NE(ErrorText([&] { result.Require(1e-2); }).find("worst at element [0, 2]"),
            std::string::npos);
}

TEST(GradientCheckTest, ChecksALoss) {
  MseLoss loss;
  const Tensor target = Tensor::FromVector({0.f, 1.f, 0.f, 1.f, 0.f, 1.f}, {2, 3});
  const GradCheckResult result = CompareLossGradient(loss, Input(), target);
  ASSERT_EQ(result.tensors.size(), 1u);
  EXPECT_EQ(result.tensors[0].what, "prediction of loss 'mse'");
  EXPECT_NO_THROW(result.Require(1e-2));
}

}  // namespace
}  // namespace tandem
