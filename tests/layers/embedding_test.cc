#include "layers/embedding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"
#include "parallel/thread_communicator.h"
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

std::vector<float> RandomIndices(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.UniformInt(vocab));
  return v;
}

class EmbeddingTest : public DeviceTest {};

TEST_P(EmbeddingTest, ParameterNameShapeAndStandardNormalInit) {
  Rng rng(1), same(1);
  Embedding emb("emb", 1000, 16, rng, device());
  Embedding twin("emb", 1000, 16, same, device());
  std::vector<NamedParameter> params = emb.Parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].name, "emb.weight");
  EXPECT_EQ(params[0].value().shape(), (Shape{1000, 16}));
  EXPECT_EQ(params[0].working(), nullptr);
  EXPECT_EQ(emb.Describe(), "emb (Embedding 1000×16)");
  const std::vector<float> w = emb.weight().ToVector();
  EXPECT_EQ(w, twin.weight().ToVector());  // same seed, same table
  double mean = 0, var = 0;
  for (float v : w) mean += v / w.size();
  for (float v : w) var += (v - mean) * (v - mean) / w.size();
  // 16000 draws of N(0, 1): the mean within 4 standard errors, the
  // variance within 5%.
  EXPECT_NEAR(mean, 0.0, 4 / std::sqrt(16000.0));
  EXPECT_NEAR(var, 1.0, 0.05);
}

TEST_P(EmbeddingTest, ForwardConcatenatesRowsPerExample) {
  Rng rng(0);
  Embedding emb("emb", 4, 2, rng, device());
  emb.weight().CopyFrom(Tensor::FromVector({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}));
  const Tensor x = Tensor::FromVector({0, 3, 2, 2, 2, 1}, {2, 3}, device());
  const Tensor y = emb.Forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 6}));
  EXPECT_EQ(y.ToVector(), (std::vector<float>{0, 1, 30, 31, 20, 21, 20, 21, 20, 21, 10, 11}));
}

// Rows of dy added into the rows their indices name, repeated indices
// adding up, and Backward adding into what the gradient held.
TEST_P(EmbeddingTest, BackwardScatterAddsWithRepeatedIndices) {
  Rng rng(0);
  Embedding emb("emb", 4, 2, rng, device());
  const Tensor x = Tensor::FromVector({1, 3, 1, 1}, {2, 2}, device());
  const Tensor dy = Tensor::FromVector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, device());
  ZeroGrad(emb);
  emb.Forward(x);
  EXPECT_FALSE(emb.Backward(dy).defined());  // indices have no gradient
  const std::vector<float> once = {0, 0, 1 + 5 + 7, 2 + 6 + 8, 0, 0, 3, 4};
  EXPECT_EQ(emb.Parameters()[0].grad().ToVector(), once);
  emb.Forward(x);
  emb.Backward(dy);
  std::vector<float> twice = once;
  for (float& v : twice) v *= 2;
  EXPECT_EQ(emb.Parameters()[0].grad().ToVector(), twice);
}

// per_position: a row per position, [batch, context, dim] (the same
// elements as the concatenated form), and dy of that shape back.
TEST_P(EmbeddingTest, PerPositionGivesARowPerPosition) {
  Rng rng(0), same(0);
  EmbeddingOptions per_position;
  per_position.per_position = true;
  Embedding rows("emb", 4, 2, rng, device(), per_position), flat("emb", 4, 2, same, device());
  const Tensor x = Tensor::FromVector({0, 3, 2, 2, 2, 1}, {2, 3}, device());
  const Tensor y = rows.Forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.ToVector(), flat.Forward(x).ToVector());
  const std::vector<float> dy = RandomValues(12, 3);
  ZeroGrad(rows);
  ZeroGrad(flat);
  EXPECT_FALSE(rows.Backward(Tensor::FromVector(dy, {2, 3, 2}, device())).defined());
  flat.Backward(Tensor::FromVector(dy, {2, 6}, device()));
  EXPECT_EQ(rows.Parameters()[0].grad().ToVector(), flat.Parameters()[0].grad().ToVector());
  rows.Forward(x);
  EXPECT_NE(ErrorText([&] { rows.Backward(Tensor::Zeros({2, 6}, device())); })
                .find("got output gradient [2, 6]: expected [2, 3, 2]"),
            std::string::npos);
}

// BackwardWith on its own: the table's gradient on the caller's lane, in
// every mode, with repeated indices.
TEST_P(EmbeddingTest, ImplementsTheFullBackwardProtocol) {
  const Tensor x = Tensor::FromVector({1, 3, 1, 0, 2, 2}, {3, 2}, device());
  std::vector<float> dy(3 * 2 * 4);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.25f * static_cast<float>(i) - 2.f;
  testing::ExpectFullBackwardProtocol(
      [&] {
        Rng rng(1);
        return std::make_unique<Embedding>("emb", 5, 4, rng, device());
      },
      x, Tensor::FromVector(dy, {3, 8}, device()));
}

// L = sum(Forward(x) * r): central differences of L over every element of
// the table against the gradient Backward(r) adds, with repeated indices.
TEST_P(EmbeddingTest, WeightGradientMatchesFiniteDifferences) {
  const int64_t vocab = 5, dim = 3;
  Rng rng(2);
  Embedding emb("emb", vocab, dim, rng, device());
  const Tensor x = Tensor::FromVector({4, 0, 4, 2, 4, 0, 1, 2}, {2, 4}, device());
  const std::vector<float> r = RandomValues(2 * 4 * dim, 3);
  auto objective = [&] {
    const std::vector<float> y = emb.Forward(x).ToVector();
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * r[i];
    return l;
  };
  ZeroGrad(emb);
  emb.Forward(x);
  emb.Backward(Tensor::FromVector(r, {2, 4 * dim}, device()));
  const std::vector<float> analytic = emb.Parameters()[0].grad().ToVector();
  std::vector<float> w = emb.weight().ToVector();
  const float step = 1e-2f;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const float original = w[i];
    w[i] = original + step;
    emb.weight().CopyFrom(Tensor::FromVector(w, {vocab, dim}));
    const double plus = objective();
    w[i] = original - step;
    emb.weight().CopyFrom(Tensor::FromVector(w, {vocab, dim}));
    const double minus = objective();
    w[i] = original;
    emb.weight().CopyFrom(Tensor::FromVector(w, {vocab, dim}));
    const double numeric = (plus - minus) / (2.0 * step);
    diff += (numeric - analytic[i]) * (numeric - analytic[i]);
    norm += numeric * numeric;
  }
  std::cout << "  gradient check emb.weight: relative error " << std::sqrt(diff / norm) << "\n";
  EXPECT_LT(std::sqrt(diff / norm), 1e-3);
}

TEST_P(EmbeddingTest, MatchesCpu) {
  const int64_t vocab = 50, dim = 300, batch = 9, context = 4;
  const std::vector<float> x = RandomIndices(batch * context, vocab, 4);
  const std::vector<float> dy = RandomValues(batch * context * dim, 5);
  std::vector<float> results[2][2];
  const Device devices[2] = {Device::Cpu(), device()};
  for (int d = 0; d < 2; ++d) {
    Rng rng(6);
    Embedding emb("emb", vocab, dim, rng, devices[d]);
    results[d][0] = emb.Forward(Tensor::FromVector(x, {batch, context}, devices[d])).ToVector();
    emb.Backward(Tensor::FromVector(dy, {batch, context * dim}, devices[d]));
    results[d][1] = emb.Parameters()[0].grad().ToVector();
  }
  // Gathering copies bits; the scatter-add sums in the same order on both.
  EXPECT_EQ(results[1][0], results[0][0]);
  EXPECT_EQ(results[1][1], results[0][1]);
}

// bf16: the output is the bfloat16 working copy's rows (the float32 master
// rounded), and the float32 gradient sums the bfloat16 dy exactly. Where the
// device does not multiply bfloat16 there is no working copy and the rows
// are the master's, in float32 (Note [bf16 where the device does not
// multiply bfloat16] in layers/precision.h).
TEST_P(EmbeddingTest, Bf16ForwardIsRoundedMasterRows) {
  Rng rng(7);
  Embedding emb("emb", 6, 5, rng, device(), EmbeddingOptions{Precision::kBf16});
  const bool bf16 = GetBackend(device()).MultipliesBFloat16();
  if (bf16) {
    ASSERT_NE(emb.Parameters()[0].working(), nullptr);
    EXPECT_EQ(emb.Parameters()[0].working()->dtype(), DType::kBFloat16);
  } else {
    EXPECT_EQ(emb.Parameters()[0].working(), nullptr);
  }
  EXPECT_EQ(emb.weight().dtype(), DType::kFloat32);
  const std::vector<float> w = emb.weight().ToVector();
  const std::vector<float> x = {5, 0, 2, 5};
  const Tensor y = emb.Forward(Tensor::FromVector(x, {2, 2}, device()));
  EXPECT_EQ(y.dtype(), bf16 ? DType::kBFloat16 : DType::kFloat32);
  const std::vector<float> got = y.ToVector();
  for (size_t p = 0; p < x.size(); ++p) {
    for (int64_t c = 0; c < 5; ++c) {
      const float master = w[static_cast<size_t>(x[p]) * 5 + c];
      EXPECT_EQ(got[p * 5 + c], bf16 ? RoundToBFloat16(master) : master);
    }
  }
  ZeroGrad(emb);
  const Tensor dy = Tensor::Full({2, 10}, 0.5f, device(), DType::kBFloat16);
  emb.Backward(dy);
  const std::vector<float> grad = emb.Parameters()[0].grad().ToVector();
  EXPECT_EQ(emb.Parameters()[0].grad().dtype(), DType::kFloat32);
  EXPECT_EQ(grad[5 * 5], 1.f);  // row 5 twice
  EXPECT_EQ(grad[0], 0.5f);
  EXPECT_EQ(grad[1 * 5], 0.f);
}

TEST_P(EmbeddingTest, ErrorsNameLayerPositionAndVocabulary) {
  Rng rng(0);
  Embedding emb("tok", 27, 4, rng, device());
  EXPECT_NE(ErrorText([&] { emb.Forward(Tensor::Zeros({8}, device())); })
                .find("layer 'tok' (Embedding 27×4) got input [8]: expected [batch, context]"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { emb.Forward(Tensor::Zeros({2, 3}, device(), DType::kBFloat16)); })
                .find("got indices of dtype bfloat16: expected float32"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] { emb.Backward(Tensor::Zeros({2, 12}, device())); })
                .find("Backward without a Forward"),
            std::string::npos);
  emb.Forward(Tensor::Zeros({2, 3}, device()));
  EXPECT_NE(ErrorText([&] { emb.Backward(Tensor::Zeros({2, 4}, device())); })
                .find("got output gradient [2, 4]: expected [2, 12]"),
            std::string::npos);
  if (!device().is_cpu()) return;  // a GPU gives NaN rows instead (embedding.h)
  for (float bad : {27.f, -1.f, 2.5f}) {
    const Tensor x = Tensor::FromVector({0, 1, 2, 3, 4, bad}, {2, 3}, device());
    const std::string text = ErrorText([&] { emb.Forward(x); });
    std::ostringstream value;
    value << "holds index " << bad << ", not a whole number in [0, 27)";
    EXPECT_NE(text.find("layer 'tok' (Embedding 27×4): input position [1, 2]"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(value.str()), std::string::npos) << text;
    EXPECT_NE(text.find("the vocabulary has 27 rows"), std::string::npos) << text;
  }
}

// ---- A Bengio-style model, Embedding -> Linear -> LayerNorm -> Linear,
// trained data-parallel: N ranks on shards of each global batch (threads
// mode, the reducer summing their gradients) end with the parameters of 1
// rank on the whole batch.

constexpr int64_t kVocab = 11, kContext = 3, kDim = 4, kHidden = 8, kClasses = 5;
constexpr int64_t kGlobalBatch = 10;

std::unique_ptr<Sequential> LanguageModel(Device device) {
  Rng rng(21);
  auto model = std::make_unique<Sequential>();
  model->Add(std::make_unique<Embedding>("emb", kVocab, kDim, rng, device));
  LinearOptions o;
  o.device = device;
  model->Add(std::make_unique<Linear>("fc1", kContext * kDim, kHidden, rng, o));
  model->Add(std::make_unique<LayerNorm>("ln", kHidden, device));
  model->Add(std::make_unique<Linear>("fc2", kHidden, kClasses, rng, o));
  return model;
}

std::vector<float> TrainOnShards(Communicator& comm, int steps) {
  std::unique_ptr<Sequential> model = LanguageModel(Device::Cpu());
  Reducer reducer(*model, comm, ReducerOptions{/*bucket_bytes=*/64});
  OptimizerConfig config;
  config.name = "sgd";
  config.lr = 0.5f;
  auto optimizer = MakeOptimizer(config, model->Parameters());
  SoftmaxCrossEntropyLoss loss;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> x = RandomIndices(kGlobalBatch * kContext, kVocab, 100 + step);
    const std::vector<float> y = RandomIndices(kGlobalBatch, kClasses, 200 + step);
    const ShardRange s = Shard(kGlobalBatch, comm.rank(), comm.size());
    const Tensor xs = Tensor::FromVector(
        std::vector<float>(x.begin() + s.begin * kContext, x.begin() + s.end * kContext),
        {s.size(), kContext});
    const Tensor ys =
        Tensor::FromVector(std::vector<float>(y.begin() + s.begin, y.begin() + s.end), {s.size()});
    optimizer->ZeroGrad();
    loss.Forward(model->Forward(xs), ys, kGlobalBatch);
    reducer.Backward(loss.Backward());
    optimizer->Step();
  }
  std::vector<float> params;
  for (NamedParameter& p : model->Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    params.insert(params.end(), v.begin(), v.end());
  }
  return params;
}

std::vector<std::vector<float>> RunRanks(int n, int steps) {
  ThreadGroup group(n);
  std::vector<std::vector<float>> params(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { params[r] = TrainOnShards(group.communicator(r), steps); });
  }
  for (std::thread& t : threads) t.join();
  return params;
}

TEST(EmbeddingModelTest, DataParallelShardsMatchOneRankOnTheGlobalBatch) {
  const int steps = 4;
  const std::vector<float> reference = RunRanks(1, steps)[0];
  const std::vector<float> initial = RunRanks(1, 0)[0];
  double moved = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    moved = std::max(moved, double(std::abs(reference[i] - initial[i])));
  }
  EXPECT_GT(moved, 1e-2) << "training left the parameters where they were";
  for (int n : {2, 3}) {
    const std::vector<std::vector<float>> ranks = RunRanks(n, steps);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(ranks[r].size(), reference.size());
      double worst = 0;
      for (size_t i = 0; i < reference.size(); ++i) {
        worst = std::max(worst, std::abs(double(ranks[r][i]) - reference[i]) /
                                    std::max(std::abs(double(reference[i])), 1e-3));
      }
      EXPECT_LT(worst, 1e-4) << n << " ranks, rank " << r;
    }
  }
}

INSTANTIATE_DEVICE_TEST_SUITE_P(EmbeddingTest);

}  // namespace
}  // namespace tandem
