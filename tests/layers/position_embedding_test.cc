#include "layers/position_embedding.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/embedding.h"
#include "layers/gradient_check.h"
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

class PositionEmbeddingTest : public DeviceTest {};

TEST_P(PositionEmbeddingTest, ParameterNameShapeAndInit) {
  Rng rng(1);
  PositionEmbedding pos("pos", 256, 8, rng, device());
  const std::vector<NamedParameter> params = pos.Parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].name, "pos.weight");
  EXPECT_EQ(params[0].value().shape(), (Shape{256, 8}));
  EXPECT_EQ(pos.Describe(), "pos (PositionEmbedding 256×8)");
  double sum_sq = 0;
  for (float v : pos.weight().ToVector()) sum_sq += double(v) * v;
  EXPECT_NEAR(sum_sq / (256 * 8), 0.02 * 0.02, 0.1 * 0.02 * 0.02);  // N(0, 0.02^2)
}

// y[b, t] = x[b, t] + table[t]; dx = dy; the table's rows t < T get the
// sums of dy over the batch, rows from T on nothing.
TEST_P(PositionEmbeddingTest, AddsRowsByPositionAndSumsTheBatch) {
  Rng rng(0);
  PositionEmbedding pos("pos", 3, 2, rng, device());
  pos.weight().CopyFrom(Tensor::FromVector({0, 1, 10, 11, 20, 21}, {3, 2}));
  const Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, device());
  const Tensor y = pos.Forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.ToVector(), (std::vector<float>{1, 3, 13, 15, 5, 7, 17, 19}));
  ZeroGrad(pos);
  const Tensor dy = Tensor::FromVector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}, device());
  EXPECT_EQ(pos.Backward(dy).ToVector(), dy.ToVector());
  EXPECT_EQ(pos.Parameters()[0].grad().ToVector(), (std::vector<float>{6, 8, 10, 12, 0, 0}));
}

TEST_P(PositionEmbeddingTest, GradientsMatchFiniteDifferences) {
  Rng rng(2);
  PositionEmbeddingOptions o;
  o.init_std = 1.f;
  PositionEmbedding pos("pos", 6, 4, rng, device(), o);
  const Tensor x = Tensor::FromVector(RandomValues(3 * 5 * 4, 3), {3, 5, 4}, device());
  CompareLayerGradients(pos, x).Require(1e-2);
}

TEST_P(PositionEmbeddingTest, ImplementsTheFullBackwardProtocol) {
  const Tensor x = Tensor::FromVector(RandomValues(2 * 3 * 4, 4), {2, 3, 4}, device());
  const Tensor dy = Tensor::FromVector(RandomValues(2 * 3 * 4, 5), {2, 3, 4}, device());
  testing::ExpectFullBackwardProtocol(
      [&] {
        Rng rng(6);
        return std::make_unique<PositionEmbedding>("pos", 5, 4, rng, device());
      },
      x, dy);
}

// After a per-position token Embedding: [batch, T] indices -> [batch, T,
// dim] rows plus positions, what a GPT's first two layers compute.
TEST_P(PositionEmbeddingTest, FollowsAPerPositionTokenEmbedding) {
  Rng rng(7);
  EmbeddingOptions per_position;
  per_position.per_position = true;
  Embedding tokens("tok", 5, 3, rng, device(), per_position);
  PositionEmbedding pos("pos", 4, 3, rng, device());
  const Tensor ids = Tensor::FromVector({4, 0, 4, 1, 1, 2}, {2, 3}, device());
  const std::vector<float> y = pos.Forward(tokens.Forward(ids)).ToVector();
  const std::vector<float> table = tokens.weight().ToVector(), rows = pos.weight().ToVector();
  const std::vector<int> id = {4, 0, 4, 1, 1, 2};
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(y[i * 3 + c], table[id[i] * 3 + c] + rows[(i % 3) * 3 + c]) << i << " " << c;
    }
  }
}

TEST_P(PositionEmbeddingTest, ErrorsNameLayerAndShapes) {
  Rng rng(0);
  PositionEmbedding pos("pos", 4, 3, rng, device());
  EXPECT_NE(ErrorText([&] { pos.Forward(Tensor::Zeros({2, 5, 3}, device())); })
                .find("layer 'pos' (PositionEmbedding 4×3) got input [2, 5, 3]: expected "
                      "[batch, T, 3] with 0 < T <= 4 (the positions the table holds)"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { pos.Forward(Tensor::Zeros({2, 3}, device())); })
                .find("got input [2, 3]: expected [batch, T, 3]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { pos.Backward(Tensor::Zeros({2, 3, 3}, device())); })
                .find("Backward without a Forward before it"),
            std::string::npos);
  pos.Forward(Tensor::Zeros({2, 3, 3}, device()));
  EXPECT_NE(ErrorText([&] { pos.Backward(Tensor::Zeros({2, 2, 3}, device())); })
                .find("got output gradient [2, 2, 3]: expected [2, 3, 3]"),
            std::string::npos);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(PositionEmbeddingTest);

}  // namespace
}  // namespace tandem
