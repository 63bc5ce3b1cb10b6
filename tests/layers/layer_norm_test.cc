#include "layers/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/gradient_check.h"
#include "tests/support/backward_protocol.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
using testing::ErrorText;

std::vector<float> RandomValues(int64_t n, uint64_t seed, float offset = 0.f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + rng.Normal();
  return v;
}

std::vector<float> Rounded(std::vector<float> v) {
  for (float& x : v) x = RoundToBFloat16(x);
  return v;
}

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// The forward pass in double: the reference the layer must match.
std::vector<double> Reference(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, int64_t rows, int64_t cols,
                              double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x[r * cols + c] - mean, 2);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] = (x[r * cols + c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
  }
  return y;
}

class LayerNormTest : public DeviceTest {
 protected:
  // A layer with weight and bias set to `w` and `b` (working copies too).
  void SetParams(LayerNorm& ln, const std::vector<float>& w, const std::vector<float>& b) {
    ln.weight().CopyFrom(Tensor::FromVector(w, {ln.features()}));
    ln.bias().CopyFrom(Tensor::FromVector(b, {ln.features()}));
    SyncWorkingCopies(ln);
  }
};

TEST_P(LayerNormTest, ParametersAreNamedAndInitialisedLikePyTorch) {
  LayerNorm ln("ln1", 5, device());
  std::vector<NamedParameter> params = ln.Parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "ln1.weight");
  EXPECT_EQ(params[1].name, "ln1.bias");
  EXPECT_EQ(params[0].value().shape(), (Shape{5}));
  EXPECT_EQ(params[0].value().ToVector(), std::vector<float>(5, 1.f));
  EXPECT_EQ(params[1].value().ToVector(), std::vector<float>(5, 0.f));
  EXPECT_EQ(params[0].working(), nullptr);
  EXPECT_EQ(ln.Describe(), "ln1 (LayerNorm 5)");
}

TEST_P(LayerNormTest, ForwardHandValues) {
  LayerNorm ln("ln", 4, device(), LayerNormOptions{0.f});
  SetParams(ln, {1, 2, 1, 0.5f}, {0, 1, -1, 0.25f});
  // Row 0: mean 2.5, variance 1.25; row 1 is constant: xhat 0 with eps 0
  // would be 0/0, so it is checked with eps below.
  const Tensor x = Tensor::FromVector({1, 2, 3, 4}, {1, 4}, device());
  const std::vector<float> y = ln.Forward(x).ToVector();
  const double s = 1 / std::sqrt(1.25);
  const std::vector<double> expected = {-1.5 * s, 2 * -0.5 * s + 1, 0.5 * s - 1,
                                        0.5 * 1.5 * s + 0.25};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-6) << i;

  LayerNorm eps("eps", 4, device());
  SetParams(eps, {3, 3, 3, 3}, {0.5f, -0.5f, 2, 0});
  const Tensor flat = Tensor::FromVector({7, 7, 7, 7}, {1, 4}, device());
  EXPECT_EQ(eps.Forward(flat).ToVector(), (std::vector<float>{0.5f, -0.5f, 2, 0}));
}

TEST_P(LayerNormTest, ForwardMatchesDoubleReferenceWithLargeMean) {
  const int64_t rows = 6, cols = 40;
  LayerNorm ln("ln", cols, device());
  const std::vector<float> w = RandomValues(cols, 1), b = RandomValues(cols, 2);
  SetParams(ln, w, b);
  // A mean of 1000 and a spread of 1: E[x^2] - mean^2 would lose it all.
  const std::vector<float> x = RandomValues(rows * cols, 3, 1000.f);
  const std::vector<float> y = ln.Forward(Tensor::FromVector(x, {rows, cols}, device()))
                                   .ToVector();
  const std::vector<double> ref = Reference(x, w, b, rows, cols, 1e-5);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 2e-3) << i;
}

TEST_P(LayerNormTest, GradientsMatchFiniteDifferences) {
  LayerNorm ln("ln", 7, device());
  SetParams(ln, RandomValues(7, 4), RandomValues(7, 5));
  const Tensor x = Tensor::FromVector(RandomValues(5 * 7, 6), {5, 7}, device());
  EXPECT_LT(CheckLayerGradients(ln, x), 1e-2);
}

// [..., features] normalises the last dimension: the 2-D layer on the
// reshaped input, bit for bit, with outputs and dx in the input's shape;
// and its gradients by finite differences.
TEST_P(LayerNormTest, NdInputNormalisesTheLastDimension) {
  LayerNorm nd("ln", 5, device()), flat("ln", 5, device());
  SetParams(nd, RandomValues(5, 7), RandomValues(5, 8));
  SetParams(flat, RandomValues(5, 7), RandomValues(5, 8));
  const std::vector<float> x = RandomValues(2 * 3 * 5, 9), dy = RandomValues(2 * 3 * 5, 10);
  const Tensor y = nd.Forward(Tensor::FromVector(x, {2, 3, 5}, device()));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(y.ToVector(), flat.Forward(Tensor::FromVector(x, {6, 5}, device())).ToVector());
  const Tensor dx = nd.Backward(Tensor::FromVector(dy, {2, 3, 5}, device()));
  EXPECT_EQ(dx.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(dx.ToVector(), flat.Backward(Tensor::FromVector(dy, {6, 5}, device())).ToVector());
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(nd.Parameters()[p].grad().ToVector(), flat.Parameters()[p].grad().ToVector()) << p;
  }
  CompareLayerGradients(nd, Tensor::FromVector(x, {2, 3, 5}, device())).Require(1e-2);
  nd.Forward(Tensor::FromVector(x, {2, 3, 5}, device()));
  EXPECT_NE(ErrorText([&] { nd.Backward(Tensor::Zeros({6, 5}, device())); })
                .find("layer 'ln' (LayerNorm 5) got output gradient [6, 5]: expected [2, 3, 5]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { nd.Forward(Tensor::Zeros({2, 3, 4}, device())); })
                .find("got input [2, 3, 4]: expected [rows, 5] or [..., 5]"),
            std::string::npos);
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy * weight, in
// double, and the parameter gradients, for one row: a check of the formula
// that does not lean on finite differences.
TEST_P(LayerNormTest, BackwardHandFormula) {
  const std::vector<float> x = {1, 4, 2, -3}, dy = {0.5f, -1, 2, 0.25f};
  const std::vector<float> w = {2, -1, 0.5f, 1};
  LayerNorm ln("ln", 4, device(), LayerNormOptions{0.f});
  SetParams(ln, w, {0, 0, 0, 0});
  ln.Forward(Tensor::FromVector(x, {1, 4}, device()));
  const std::vector<float> dx = ln.Backward(Tensor::FromVector(dy, {1, 4}, device())).ToVector();
  double mean = 1, var = 0;  // (1 + 4 + 2 - 3) / 4
  for (float v : x) var += (v - mean) * (v - mean) / 4;
  const double rstd = 1 / std::sqrt(var);
  double mean_g = 0, mean_gx = 0;
  for (int c = 0; c < 4; ++c) {
    mean_g += dy[c] * w[c] / 4.0;
    mean_gx += dy[c] * w[c] * (x[c] - mean) * rstd / 4.0;
  }
  const std::vector<float> dw = ln.Parameters()[0].grad().ToVector();
  const std::vector<float> db = ln.Parameters()[1].grad().ToVector();
  for (int c = 0; c < 4; ++c) {
    const double xhat = (x[c] - mean) * rstd;
    EXPECT_NEAR(dx[c], rstd * (dy[c] * w[c] - mean_g - xhat * mean_gx), 1e-5) << c;
    EXPECT_NEAR(dw[c], dy[c] * xhat, 1e-5) << c;
    EXPECT_FLOAT_EQ(db[c], dy[c]) << c;
  }
}

TEST_P(LayerNormTest, BackwardAddsIntoGradients) {
  LayerNorm ln("ln", 6, device());
  SetParams(ln, RandomValues(6, 7), RandomValues(6, 8));
  const Tensor x = Tensor::FromVector(RandomValues(4 * 6, 9), {4, 6}, device());
  const Tensor dy = Tensor::FromVector(RandomValues(4 * 6, 10), {4, 6}, device());
  ZeroGrad(ln);
  ln.Forward(x);
  ln.Backward(dy);
  const std::vector<float> w1 = ln.Parameters()[0].grad().ToVector();
  const std::vector<float> b1 = ln.Parameters()[1].grad().ToVector();
  ln.Forward(x);
  ln.Backward(dy);
  const std::vector<float> w2 = ln.Parameters()[0].grad().ToVector();
  const std::vector<float> b2 = ln.Parameters()[1].grad().ToVector();
  for (size_t i = 0; i < w1.size(); ++i) {
    EXPECT_NEAR(w2[i], 2 * w1[i], 1e-5);
    EXPECT_NEAR(b2[i], 2 * b1[i], 1e-5);
  }
}

// The same layer on this device and on the CPU: forward, input gradient and
// parameter gradients agree to float32 rounding (the GPU sums in another
// order). Rows longer than a block's threads exercise the strided loops.
// BackwardWith on its own: one fused pass on the caller's lane, in every
// mode, in float32 and in bf16.
TEST_P(LayerNormTest, ImplementsTheFullBackwardProtocol) {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const Tensor x = Tensor::FromVector(RandomValues(4 * 6, 31, 0.5f), {4, 6}, device());
    const Tensor dy = Tensor::FromVector(RandomValues(4 * 6, 32), {4, 6}, device());
    LayerNormOptions options;
    options.precision = precision;
    testing::ExpectFullBackwardProtocol(
        [&] {
          auto ln = std::make_unique<LayerNorm>("ln", 6, device(), options);
          ln->weight().CopyFrom(Tensor::FromVector(RandomValues(6, 33, 1.f), {6}));
          SyncWorkingCopies(*ln);
          return ln;
        },
        x, dy);
  }
}

TEST_P(LayerNormTest, MatchesCpu) {
  for (int64_t cols : {3, 100, 700}) {
    const int64_t rows = 37;
    const std::vector<float> w = RandomValues(cols, 11), b = RandomValues(cols, 12);
    const std::vector<float> x = RandomValues(rows * cols, 13, 3.f);
    const std::vector<float> dy = RandomValues(rows * cols, 14);
    std::vector<std::vector<float>> results[2];
    const Device devices[2] = {Device::Cpu(), device()};
    for (int d = 0; d < 2; ++d) {
      LayerNorm ln("ln", cols, devices[d]);
      SetParams(ln, w, b);
      results[d].push_back(ln.Forward(Tensor::FromVector(x, {rows, cols}, devices[d]))
                               .ToVector());
      results[d].push_back(ln.Backward(Tensor::FromVector(dy, {rows, cols}, devices[d]))
                               .ToVector());
      results[d].push_back(ln.Parameters()[0].grad().ToVector());
      results[d].push_back(ln.Parameters()[1].grad().ToVector());
    }
    for (size_t k = 0; k < results[0].size(); ++k) {
      EXPECT_LE(RelativeL2(results[1][k], results[0][k]), 1e-5)
          << "cols " << cols << ", result " << k << " (y, dx, dweight, dbias)";
    }
  }
}

// bf16 against fp32 on values bfloat16 holds exactly (inputs, weight and
// bias), around a mean of 8: the statistics must be float32 (a mean rounded
// to bfloat16, whose spacing there is 1/16, would be off by up to 1/32, a
// tenth of a standard deviation), so the only error is y's rounding to
// bfloat16, at most 2^-9 relative per element.
TEST_P(LayerNormTest, Bf16MatchesFloat32OnBf16Values) {
  const int64_t rows = 16, cols = 48;
  LayerNorm half("ln", cols, device(), LayerNormOptions{1e-5f, Precision::kBf16});
  LayerNorm full("ln", cols, device());
  // bfloat16 only where the device multiplies it (Note [bf16 where the
  // device does not multiply bfloat16] in layers/precision.h).
  const DType compute =
      GetBackend(device()).MultipliesBFloat16() ? DType::kBFloat16 : DType::kFloat32;
  if (compute == DType::kBFloat16) {
    ASSERT_NE(half.Parameters()[0].working(), nullptr);
    EXPECT_EQ(half.Parameters()[0].working()->dtype(), DType::kBFloat16);
  } else {
    EXPECT_EQ(half.Parameters()[0].working(), nullptr);
  }
  EXPECT_EQ(half.weight().dtype(), DType::kFloat32);
  EXPECT_EQ(half.Describe(), "ln (LayerNorm 48, bf16)");
  const std::vector<float> w = Rounded(RandomValues(cols, 15)), b = Rounded(RandomValues(cols, 16));
  SetParams(half, w, b);
  SetParams(full, w, b);
  std::vector<float> x = RandomValues(rows * cols, 17);
  for (float& v : x) v = 8.f + std::round(v * 4.f) / 16.f;  // bf16-exact near 8
  const Tensor x_half = Tensor::FromVector(x, {rows, cols}, device(), DType::kBFloat16);
  const Tensor x_full = Tensor::FromVector(x, {rows, cols}, device());
  const Tensor y_half = half.Forward(x_half);
  const std::vector<float> y_full = full.Forward(x_full).ToVector();
  EXPECT_EQ(y_half.dtype(), compute);
  const std::vector<float> yh = y_half.ToVector();
  for (size_t i = 0; i < yh.size(); ++i) {
    EXPECT_NEAR(yh[i], y_full[i], std::ldexp(std::abs(y_full[i]), -8) + 1e-6) << i;
  }
  // Backward: dx in the compute dtype, float32 gradients, close to fp32's.
  const std::vector<float> dy = Rounded(RandomValues(rows * cols, 18));
  ZeroGrad(half);
  ZeroGrad(full);
  const Tensor dx_half =
      half.Backward(Tensor::FromVector(dy, {rows, cols}, device(), DType::kBFloat16));
  const Tensor dx_full = full.Backward(Tensor::FromVector(dy, {rows, cols}, device()));
  EXPECT_EQ(dx_half.dtype(), compute);
  EXPECT_EQ(half.Parameters()[0].grad().dtype(), DType::kFloat32);
  EXPECT_LE(RelativeL2(dx_half.ToVector(), dx_full.ToVector()), std::pow(2.0, -7));
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_LE(RelativeL2(half.Parameters()[p].grad().ToVector(),
                         full.Parameters()[p].grad().ToVector()),
              std::pow(2.0, -7))
        << "parameter " << p;
  }
}

TEST_P(LayerNormTest, ErrorsNameLayerAndShapes) {
  LayerNorm ln("ln2", 64, device());
  EXPECT_NE(ErrorText([&] { ln.Forward(Tensor::Zeros({8, 60}, device())); })
                .find("layer 'ln2' (LayerNorm 64) got input [8, 60]: expected [rows, 64]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { ln.Backward(Tensor::Zeros({8, 64}, device())); })
                .find("Backward without a Forward"),
            std::string::npos);
  ln.Forward(Tensor::Zeros({8, 64}, device()));
  EXPECT_NE(ErrorText([&] { ln.Backward(Tensor::Zeros({4, 64}, device())); })
                .find("got output gradient [4, 64]: expected [8, 64]"),
            std::string::npos);
  EXPECT_NE(ErrorText([] { LayerNorm bad("ln3", 0, Device::Cpu()); })
                .find("layer 'ln3': LayerNorm needs a positive feature count, got 0"),
            std::string::npos);
}

TEST_P(LayerNormTest, OpChecksOperands) {
  const Tensor x = Tensor::Zeros({3, 4}, device());
  const Tensor w = Tensor::Zeros({5}, device()), b = Tensor::Zeros({4}, device());
  Tensor y = Tensor::Empty({3, 4}, device());
  Tensor mean = Tensor::Empty({3}, device()), rstd = Tensor::Empty({3}, device());
  EXPECT_NE(ErrorText([&] { ops::LayerNormForward(x, w, b, 1e-5f, y, mean, rstd); })
                .find("LayerNormForward: weight [5] does not match the 4 features of x [3, 4]"),
            std::string::npos);
  const Tensor w4 = Tensor::Zeros({4}, device());
  Tensor half_y = Tensor::Empty({3, 4}, device(), DType::kBFloat16);
  EXPECT_NE(ErrorText([&] { ops::LayerNormForward(x, w4, b, 1e-5f, half_y, mean, rstd); })
                .find("LayerNormForward: y is bfloat16 [3, 4], expected float32"),
            std::string::npos);
  Tensor same = x;
  EXPECT_NE(ErrorText([&] { ops::LayerNormForward(x, w4, b, 1e-5f, same, mean, rstd); })
                .find("LayerNormForward: y [3, 4] overlaps x [3, 4]"),
            std::string::npos);
  Tensor dx = Tensor::Empty({3, 4}, device()), dw = Tensor::Zeros({4}, device(), DType::kBFloat16);
  EXPECT_NE(ErrorText([&] {
              ops::LayerNormBackward(x, x, w4, mean, rstd, &dx, &dw, nullptr);
            }).find("LayerNormBackward: dweight is bfloat16 [4], expected float32"),
            std::string::npos);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(LayerNormTest);

}  // namespace
}  // namespace tandem
