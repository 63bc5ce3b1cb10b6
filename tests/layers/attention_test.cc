#include "layers/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
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

std::vector<float> RandomValues(int64_t n, uint64_t seed, float scale = 1.f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * rng.Normal();
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

// RelativeL2(half, full), printed: how far bf16 is from fp32.
double Bf16Error(const std::string& what, const std::vector<float>& half,
                 const std::vector<float>& full) {
  const double error = RelativeL2(half, full);
  std::cout << "  bf16 vs fp32, " << what << ": relative L2 error " << error << "\n";
  return error;
}

// y = x W^T + b for x [rows, in], W [out, in], in double.
std::vector<double> Affine(const std::vector<double>& x, const std::vector<float>& w,
                           const std::vector<float>& b, int64_t rows, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * double(w[o * in + i]);
      y[r * out + o] = s;
    }
  }
  return y;
}

// The layer's forward pass in double, written the plain way (loops over
// batch, head and positions, no permutes): the reference it must match.
std::vector<double> Reference(MultiHeadSelfAttention& attn, const std::vector<float>& x_in,
                              int64_t batch, int64_t T) {
  const int64_t C = attn.width(), H = attn.heads(), hs = attn.head_size();
  const std::vector<double> x(x_in.begin(), x_in.end());
  const std::vector<double> qkv =
      Affine(x, attn.qkv().weight().ToVector(), attn.qkv().bias().ToVector(), batch * T, C,
             3 * C);
  // qkv row (b, t): [q | k | v], each [H, hs].
  auto at = [&](int64_t b, int64_t t, int64_t which, int64_t h, int64_t j) {
    return qkv[(b * T + t) * 3 * C + which * C + h * hs + j];
  };
  std::vector<double> merged(static_cast<size_t>(batch * T * C));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> p(static_cast<size_t>(t + 1));
        double max = -1e300, sum = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < hs; ++j) dot += at(b, t, 0, h, j) * at(b, s, 1, h, j);
          p[s] = dot / std::sqrt(double(hs));
          max = std::max(max, p[s]);
        }
        for (double& v : p) sum += (v = std::exp(v - max));
        for (int64_t j = 0; j < hs; ++j) {
          double y = 0;
          for (int64_t s = 0; s <= t; ++s) y += p[s] / sum * at(b, s, 2, h, j);
          merged[(b * T + t) * C + h * hs + j] = y;
        }
      }
    }
  }
  return Affine(merged, attn.proj().weight().ToVector(), attn.proj().bias().ToVector(),
                batch * T, C, C);
}

class AttentionTest : public DeviceTest {
 protected:
  std::unique_ptr<MultiHeadSelfAttention> Make(int64_t width, int64_t heads, uint64_t seed,
                                               Precision precision = Precision::kFp32) {
    Rng rng(seed);
    AttentionOptions o;
    o.device = device();
    o.precision = precision;
    auto attn = std::make_unique<MultiHeadSelfAttention>("attn", width, heads, rng, o);
    // Biases away from zero, so that the reference checks them too.
    for (Linear* fc : {&attn->qkv(), &attn->proj()}) {
      const int64_t n = fc->out_features();
      fc->bias().CopyFrom(Tensor::FromVector(RandomValues(n, seed + 1, 0.1f), {n}));
    }
    SyncWorkingCopies(*attn);
    return attn;
  }
  Tensor Input(const Shape& shape, uint64_t seed, DType dtype = DType::kFloat32) {
    return Tensor::FromVector(RandomValues(NumElements(shape), seed), shape, device(), dtype);
  }
};

// Its parameters are its two Linears', under "<name>.", and they are its
// children (what checkpoints, the reducer and hooks walk).
TEST_P(AttentionTest, ParametersAreTheProjections) {
  std::unique_ptr<MultiHeadSelfAttention> attn = Make(12, 3, 1);
  EXPECT_EQ(attn->head_size(), 4);
  EXPECT_EQ(attn->Describe(), "attn (MultiHeadSelfAttention 12, 3 heads)");
  const std::vector<Layer*> children = attn->Children();
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0], &attn->qkv());
  EXPECT_EQ(children[1], &attn->proj());
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const NamedParameter& p : attn->Parameters()) {
    names.push_back(p.name);
    shapes.push_back(p.value().shape());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"attn.qkv.weight", "attn.qkv.bias",
                                             "attn.proj.weight", "attn.proj.bias"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{36, 12}, {36}, {12, 12}, {12}}));
}

TEST_P(AttentionTest, MatchesFloat64Reference) {
  for (int64_t heads : {1, 3}) {
    std::unique_ptr<MultiHeadSelfAttention> attn = Make(12, heads, 2);
    const int64_t batch = 3, T = 7;
    const Tensor x = Input({batch, T, 12}, 3);
    const Tensor y = attn->Forward(x);
    EXPECT_EQ(y.shape(), (Shape{batch, T, 12}));
    const std::vector<double> expected = Reference(*attn, x.ToVector(), batch, T);
    const std::vector<float> got = y.ToVector();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    // float32 arithmetic on values of order 1, sums of at most 36 terms.
    EXPECT_LT(worst, 1e-5) << heads << " heads";
  }
}

TEST_P(AttentionTest, GradientsMatchFiniteDifferences) {
  for (int64_t heads : {1, 2}) {
    std::unique_ptr<MultiHeadSelfAttention> attn = Make(8, heads, 4);
    CompareLayerGradients(*attn, Input({2, 5, 8}, 5)).Require(1e-2);
  }
  // One position: the softmax of a single score is 1.
  std::unique_ptr<MultiHeadSelfAttention> attn = Make(8, 2, 6);
  CompareLayerGradients(*attn, Input({3, 1, 8}, 7)).Require(1e-2);
}

// Changing the input at position t moves no output before t, bit for bit,
// and a gradient at position t alone reaches no input after t (exactly 0).
TEST_P(AttentionTest, IsCausal) {
  std::unique_ptr<MultiHeadSelfAttention> attn = Make(8, 2, 8);
  const int64_t batch = 2, T = 6, C = 8;
  const std::vector<float> x = RandomValues(batch * T * C, 9);
  const std::vector<float> y = attn->Forward(Tensor::FromVector(x, {batch, T, C}, device()))
                                   .ToVector();
  attn->Backward(Tensor::Zeros({batch, T, C}, device()));
  for (int64_t t : {0, 3, 5}) {
    std::vector<float> changed = x;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < C; ++c) changed[(b * T + t) * C + c] += 1.5f;
    }
    const std::vector<float> y2 =
        attn->Forward(Tensor::FromVector(changed, {batch, T, C}, device())).ToVector();
    std::vector<float> dy(x.size(), 0.f);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < C; ++c) dy[(b * T + t) * C + c] = 1.f;
    }
    const std::vector<float> dx =
        attn->Backward(Tensor::FromVector(dy, {batch, T, C}, device())).ToVector();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < T; ++s) {
        bool moved = false, reached = false;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = (b * T + s) * C + c;
          moved |= y2[i] != y[i];
          reached |= dx[i] != 0.f;
        }
        EXPECT_EQ(moved, s >= t) << "position " << s << " after a change at " << t;
        EXPECT_EQ(reached, s <= t) << "position " << s << " from a gradient at " << t;
      }
    }
  }
}

// bf16 against the float32 layer from the same seed, on bfloat16-exact
// inputs: where the device multiplies bfloat16 the projections, q, k, v,
// scores, probabilities and outputs are each rounded to bfloat16 (relative
// 2^-9 each), a few roundings in a row; elsewhere bf16 computes as fp32.
TEST_P(AttentionTest, Bf16MatchesFloat32) {
  std::unique_ptr<MultiHeadSelfAttention> half = Make(16, 2, 10, Precision::kBf16);
  std::unique_ptr<MultiHeadSelfAttention> full = Make(16, 2, 10, Precision::kFp32);
  const Shape shape = {2, 9, 16};
  const std::vector<float> x = Rounded(RandomValues(NumElements(shape), 11));
  const std::vector<float> dy = Rounded(RandomValues(NumElements(shape), 12));
  const DType compute =
      GetBackend(device()).MultipliesBFloat16() ? DType::kBFloat16 : DType::kFloat32;
  const Tensor y_half = half->Forward(Tensor::FromVector(x, shape, device()));
  EXPECT_EQ(y_half.dtype(), compute);
  const std::vector<float> y_full =
      full->Forward(Tensor::FromVector(x, shape, device())).ToVector();
  EXPECT_LE(Bf16Error("output", y_half.ToVector(), y_full), std::pow(2.0, -6));
  ZeroGrad(*half);
  ZeroGrad(*full);
  const Tensor dx_half = half->Backward(Tensor::FromVector(dy, shape, device(), DType::kBFloat16));
  EXPECT_EQ(dx_half.dtype(), compute);
  const std::vector<float> dx_full =
      full->Backward(Tensor::FromVector(dy, shape, device())).ToVector();
  EXPECT_LE(Bf16Error("input gradient", dx_half.ToVector(), dx_full), std::pow(2.0, -5));
  const std::vector<NamedParameter> ph = half->Parameters(), pf = full->Parameters();
  for (size_t p = 0; p < ph.size(); ++p) {
    EXPECT_EQ(ph[p].grad().dtype(), DType::kFloat32);
    EXPECT_LE(Bf16Error(ph[p].name, ph[p].grad().ToVector(), pf[p].grad().ToVector()),
              std::pow(2.0, -5))
        << ph[p].name;
  }
}

TEST_P(AttentionTest, ImplementsTheFullBackwardProtocol) {
  testing::ExpectFullBackwardProtocol([&] { return Make(8, 2, 13); }, Input({2, 4, 8}, 14),
                                      Input({2, 4, 8}, 15));
}

// The hooks that travel with a pass hear of each projection: forward qkv
// then proj, backward proj's gradients ready before qkv's.
TEST_P(AttentionTest, HooksSeeTheProjections) {
  std::unique_ptr<MultiHeadSelfAttention> attn = Make(8, 2, 16);
  std::vector<std::string> heard;
  LayerHooks hooks;
  hooks.on_forward_done = [&](Layer& l) { heard.push_back("forward " + l.Name()); };
  hooks.on_params_ready = [&](Layer& l) { heard.push_back("ready " + l.Name()); };
  ForwardArgs forward;
  forward.hooks = &hooks;
  attn->ForwardWith(Input({2, 3, 8}, 17), forward);
  BackwardArgs backward = BackwardArgs::For(device());
  backward.hooks = &hooks;
  int ready = 0;
  backward.on_params_ready = [&] { ++ready; };
  testing::JoinedBackwardWith(*attn, Input({2, 3, 8}, 18), backward);
  EXPECT_EQ(heard, (std::vector<std::string>{"forward qkv", "forward proj", "ready proj",
                                             "ready qkv"}));
  EXPECT_EQ(ready, 1);
}

TEST_P(AttentionTest, ErrorsNameLayerAndShapes) {
  Rng rng(0);
  AttentionOptions o;
  o.device = device();
  EXPECT_NE(ErrorText([&] { MultiHeadSelfAttention("attn", 10, 3, rng, o); })
                .find("layer 'attn' (MultiHeadSelfAttention): width 10 is not divisible by 3 "
                      "heads"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { MultiHeadSelfAttention("attn", 8, 0, rng, o); })
                .find("width and heads must be positive, got width 8 and 0 heads"),
            std::string::npos);
  MultiHeadSelfAttention attn("attn", 8, 2, rng, o);
  EXPECT_NE(ErrorText([&] { attn.Forward(Tensor::Zeros({4, 8}, device())); })
                .find("layer 'attn' (MultiHeadSelfAttention 8, 2 heads) got input [4, 8]: "
                      "expected [batch, T, 8]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { attn.Forward(Tensor::Zeros({2, 3, 6}, device())); })
                .find("got input [2, 3, 6]: expected [batch, T, 8]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { attn.Backward(Tensor::Zeros({2, 3, 8}, device())); })
                .find("Backward without a Forward before it"),
            std::string::npos);
  attn.Forward(Tensor::Zeros({2, 3, 8}, device()));
  EXPECT_NE(ErrorText([&] { attn.Backward(Tensor::Zeros({2, 4, 8}, device())); })
                .find("layer 'attn' (MultiHeadSelfAttention 8, 2 heads) got output gradient "
                      "[2, 4, 8]: expected [2, 3, 8]"),
            std::string::npos);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(AttentionTest);

}  // namespace
}  // namespace tandem
