#include "layers/transformer_block.h"

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
#include "layers/embedding.h"
#include "layers/gradient_check.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/position_embedding.h"
#include "layers/sequential.h"
#include "tests/support/backward_protocol.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
using testing::ErrorText;

std::vector<float> RandomValues(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.Normal();
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

class TransformerBlockTest : public DeviceTest {
 protected:
  std::unique_ptr<TransformerBlock> Make(int64_t width, int64_t heads, uint64_t seed,
                                         Precision precision = Precision::kFp32) {
    Rng rng(seed);
    TransformerBlockOptions o;
    o.device = device();
    o.precision = precision;
    return std::make_unique<TransformerBlock>("block", width, heads, rng, o);
  }
  Tensor Input(const Shape& shape, uint64_t seed) {
    return Tensor::FromVector(RandomValues(NumElements(shape), seed), shape, device());
  }
};

// A container: its children in order, their parameters under "block.".
TEST_P(TransformerBlockTest, ChildrenAndParameterNames) {
  std::unique_ptr<TransformerBlock> block = Make(8, 2, 1);
  EXPECT_EQ(block->Describe(), "block (TransformerBlock 8, 2 heads)");
  std::vector<std::string> children;
  for (Layer* child : block->Children()) children.push_back(child->Name());
  EXPECT_EQ(children, (std::vector<std::string>{"ln1", "attn", "ln2", "mlp_fc", "mlp_proj"}));
  std::vector<std::string> names;
  for (const NamedParameter& p : block->Parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "block.ln1.weight", "block.ln1.bias", "block.attn.qkv.weight",
                       "block.attn.qkv.bias", "block.attn.proj.weight", "block.attn.proj.bias",
                       "block.ln2.weight", "block.ln2.bias", "block.mlp_fc.weight",
                       "block.mlp_fc.bias", "block.mlp_proj.weight", "block.mlp_proj.bias"}));
  EXPECT_EQ(block->mlp_fc().out_features(), 32);
}

// y = h + mlp_proj(gelu(mlp_fc(ln2(h)))), h = x + attn(ln1(x)), from the
// children run one by one.
TEST_P(TransformerBlockTest, ForwardIsPreLayerNormResiduals) {
  std::unique_ptr<TransformerBlock> block = Make(8, 2, 2);
  const Tensor x = Input({2, 5, 8}, 3);
  const std::vector<float> y = block->Forward(x).ToVector();
  const std::vector<float> a = block->attn().Forward(block->ln1().Forward(x)).ToVector();
  std::vector<float> h = x.ToVector();
  for (size_t i = 0; i < h.size(); ++i) h[i] += a[i];
  const Tensor h_t = Tensor::FromVector(h, x.shape(), device());
  const std::vector<float> f =
      block->mlp_proj().Forward(block->mlp_fc().Forward(block->ln2().Forward(h_t))).ToVector();
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(y[i], h[i] + f[i]) << i;
}

TEST_P(TransformerBlockTest, GradientsMatchFiniteDifferences) {
  std::unique_ptr<TransformerBlock> block = Make(8, 2, 4);
  CompareLayerGradients(*block, Input({2, 4, 8}, 5)).Require(1e-2);
}

TEST_P(TransformerBlockTest, ImplementsTheFullBackwardProtocol) {
  testing::ExpectFullBackwardProtocol([&] { return Make(8, 2, 6); }, Input({2, 3, 8}, 7),
                                      Input({2, 3, 8}, 8));
}

// A change at position t moves no output before t.
TEST_P(TransformerBlockTest, IsCausal) {
  std::unique_ptr<TransformerBlock> block = Make(8, 2, 9);
  const int64_t T = 5, C = 8;
  const std::vector<float> x = RandomValues(2 * T * C, 10);
  const std::vector<float> y =
      block->Forward(Tensor::FromVector(x, {2, T, C}, device())).ToVector();
  std::vector<float> changed = x;
  const int64_t t = 2;
  for (int64_t b = 0; b < 2; ++b) changed[(b * T + t) * C] -= 2.f;
  const std::vector<float> y2 =
      block->Forward(Tensor::FromVector(changed, {2, T, C}, device())).ToVector();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t s = 0; s < T; ++s) {
      bool moved = false;
      for (int64_t c = 0; c < C; ++c) moved |= y2[(b * T + s) * C + c] != y[(b * T + s) * C + c];
      EXPECT_EQ(moved, s >= t) << "position " << s;
    }
  }
}

// bf16 against fp32 from the same seed: a few bfloat16 roundings deep.
TEST_P(TransformerBlockTest, Bf16MatchesFloat32) {
  std::unique_ptr<TransformerBlock> half = Make(16, 2, 11, Precision::kBf16);
  std::unique_ptr<TransformerBlock> full = Make(16, 2, 11, Precision::kFp32);
  const Tensor x = Input({2, 6, 16}, 12), dy = Input({2, 6, 16}, 13);
  EXPECT_LE(Bf16Error("output", half->Forward(x).ToVector(), full->Forward(x).ToVector()),
            std::pow(2.0, -6));
  ZeroGrad(*half);
  ZeroGrad(*full);
  EXPECT_LE(Bf16Error("input gradient", half->Backward(dy).ToVector(),
                      full->Backward(dy).ToVector()),
            std::pow(2.0, -5));
  const std::vector<NamedParameter> ph = half->Parameters(), pf = full->Parameters();
  for (size_t p = 0; p < ph.size(); ++p) {
    EXPECT_LE(Bf16Error(ph[p].name, ph[p].grad().ToVector(), pf[p].grad().ToVector()),
              std::pow(2.0, -5));
  }
}

TEST_P(TransformerBlockTest, ErrorsNameLayerAndShapes) {
  Rng rng(0);
  TransformerBlockOptions o;
  o.device = device();
  EXPECT_NE(ErrorText([&] { TransformerBlock("block3", 10, 3, rng, o); })
                .find("layer 'block3' (TransformerBlock): width 10 is not divisible by 3 heads"),
            std::string::npos);
  TransformerBlock block("block3", 8, 2, rng, o);
  EXPECT_NE(ErrorText([&] { block.Forward(Tensor::Zeros({2, 3, 6}, device())); })
                .find("layer 'block3' (TransformerBlock 8, 2 heads) got input [2, 3, 6]: "
                      "expected [batch, T, 8]"),
            std::string::npos);
  block.Forward(Tensor::Zeros({2, 3, 8}, device()));
  EXPECT_NE(ErrorText([&] { block.Backward(Tensor::Zeros({2, 8}, device())); })
                .find("got output gradient [2, 8]: expected [2, 3, 8]"),
            std::string::npos);
}

// A character-level GPT in miniature: a per-position token embedding,
// positions, a block, a final LayerNorm and a head, in a Sequential; SGD on
// a cyclic sequence (each token's successor is fixed) brings the
// next-token loss down.
TEST(TransformerBlockTrainingTest, ABlockInASequentialTrainsOnTheCpu) {
  const int64_t vocab = 5, width = 16, batch = 4, T = 8;
  Rng rng(3);
  EmbeddingOptions per_position;
  per_position.per_position = true;
  Sequential model("gpt");
  model.Emplace<Embedding>("tok", vocab, width, rng, Device::Cpu(), per_position);
  model.Emplace<PositionEmbedding>("pos", T, width, rng, Device::Cpu());
  model.Emplace<TransformerBlock>("block0", width, 2, rng);
  model.Emplace<LayerNorm>("ln_f", width, Device::Cpu());
  model.Emplace<Linear>("head", width, vocab, rng);
  std::vector<float> ids, next;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      ids.push_back(static_cast<float>((b + t) % vocab));
      next.push_back(static_cast<float>((b + t + 1) % vocab));
    }
  }
  const Tensor x = Tensor::FromVector(ids, {batch, T});
  const Tensor labels = Tensor::FromVector(next, {batch * T});
  SgdParams params;
  params.lr = 0.1f;
  Sgd sgd(model.Parameters(), params);
  SoftmaxCrossEntropyLoss ce;
  std::vector<float> losses;
  for (int step = 0; step < 30; ++step) {
    sgd.ZeroGrad();
    const Tensor logits = model.Forward(x);
    ASSERT_EQ(logits.shape(), (Shape{batch, T, vocab}));
    losses.push_back(ce.Forward(logits.Reshape({batch * T, vocab}), labels).Item());
    model.Backward(ce.Backward().Reshape({batch, T, vocab}));
    sgd.Step();
  }
  std::cout << "loss " << losses.front() << " -> " << losses.back() << "\n";
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  EXPECT_LT(losses[15], losses.front());
}

INSTANTIATE_DEVICE_TEST_SUITE_P(TransformerBlockTest);

}  // namespace
}  // namespace tandem
