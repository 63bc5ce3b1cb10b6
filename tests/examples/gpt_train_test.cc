// examples/gpt: the model's parameters counted by hand and its shapes,
// picking a token, the mean step time, and a short training on a small
// corpus this test writes (it beats the bigram baseline; the same seed
// gives the same run and the same sample).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "examples/gpt/model.h"
#include "examples/gpt/sample.h"
#include "examples/gpt/train.h"

namespace tandem {
namespace gpt {
namespace {

TEST(GptModel, DefaultShapeHasTheParametersCountedByHand) {
  ModelConfig config;  // 4 blocks, 4 heads, width 128, context 64
  config.vocab = 114;
  Rng rng(1);
  std::unique_ptr<Sequential> model = BuildGpt(config, rng);
  const int64_t c = 128;
  // ln1, qkv, proj, ln2, mlp_fc (4c), mlp_proj
  const int64_t block =
      2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
  EXPECT_EQ(ParameterCount(*model), 114 * c + 64 * c + 4 * block + 2 * c + (c * 114 + 114));
  EXPECT_EQ(ParameterCount(*model), 830834);
  // Any sequence length up to the context: logits at every position.
  EXPECT_EQ(model->Forward(Tensor::Zeros({3, 64})).shape(), (Shape{3, 64, 114}));
  EXPECT_EQ(model->Forward(Tensor::Zeros({1, 5})).shape(), (Shape{1, 5, 114}));
}

TEST(GptModel, WidthMustBeAMultipleOfHeads) {
  ModelConfig config;
  config.vocab = 10;
  config.width = 30;
  config.heads = 4;
  Rng rng(1);
  try {
    BuildGpt(config, rng);
    FAIL() << "width 30 with 4 heads built";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--width=30 is not a multiple of --heads=4"),
              std::string::npos)
        << e.what();
  }
  config.heads = 3;
  config.layers = 0;
  EXPECT_EQ(BuildGpt(config, rng)->Forward(Tensor::Zeros({2, 4})).shape(), (Shape{2, 4, 10}));
}

TEST(GptSample, PickTokenIsTheArgmaxAtZeroTemperatureElseADraw) {
  const float logits[] = {0.f, 2.f, 2.f, std::log(2.f)};
  EXPECT_EQ(PickToken(logits, 4, 0.f, 0.99f), 1);  // the first of ties
  // At temperature 1: p = (1, e^2, e^2, 2) / (3 + 2 e^2).
  const double total = 3.0 + 2.0 * std::exp(2.0);
  EXPECT_EQ(PickToken(logits, 4, 1.f, 0.f), 0);
  EXPECT_EQ(PickToken(logits, 4, 1.f, static_cast<float>(1.5 / total)), 1);
  EXPECT_EQ(PickToken(logits, 4, 1.f, static_cast<float>((1.0 + std::exp(2.0)) / total + 1e-3)), 2);
  EXPECT_EQ(PickToken(logits, 4, 1.f, 0.9999f), 3);
  EXPECT_EQ(PickToken(logits, 4, 1.f, 1.5f), 3);  // beyond the rounded sum: the last
}

TEST(GptTrain, MeanStepMsWeighsEachIntervalByItsSteps) {
  std::vector<EvalStats> evals(2);
  evals[0].step = 10;
  evals[0].samples_per_second = 1000;  // 12 examples a step: 12 ms
  evals[1].step = 40;
  evals[1].samples_per_second = 2000;  // 6 ms
  EXPECT_DOUBLE_EQ(MeanStepMs(evals, 12), (10 * 12.0 + 30 * 6.0) / 40);
  EXPECT_EQ(MeanStepMs({}, 12), 0.0);
}

// Sayings of a fixed grammar: something a context of a few words predicts
// better than the previous byte does.
std::string SmallCorpus() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/sayings.txt";
  std::ofstream out(path);
  const char* nouns[] = {"cat", "dog", "program", "bug", "user", "kernel"};
  const char* verbs[] = {"eats", "finds", "writes", "breaks"};
  uint64_t s = 7;
  const auto next = [&](int n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((s >> 33) % n);
  };
  for (int i = 0; i < 600; ++i) {
    out << "the " << nouns[next(6)] << " " << verbs[next(4)] << " the " << nouns[next(6)]
        << ".\n%\n";
  }
  return path;
}

GptConfig SmallConfig() {
  GptConfig config;
  config.corpus = SmallCorpus();
  config.model.context = 16;
  config.model.layers = 1;
  config.model.heads = 2;
  config.model.width = 32;
  config.steps = 60;
  config.eval_every = 30;
  config.batch_size = 16;
  config.val_windows = 64;
  config.optimizer.lr = 0.01f;
  config.warmup_steps = 5;
  config.sample_length = 40;
  config.prompt = "the ";
  return config;
}

TEST(GptTrain, ShortRunBeatsTheBigramAndRepeatsItself) {
  std::ostringstream log;
  const GptResult a = TrainGpt(SmallConfig(), log);
  ASSERT_EQ(a.evals.size(), 2u) << log.str();
  EXPECT_LT(a.val_loss, a.bigram_loss) << log.str();
  EXPECT_GT(a.step_ms, 0.0);
  EXPECT_EQ(a.sample.size(), 4u + 40u);
  EXPECT_EQ(a.sample.substr(0, 4), "the ");
  EXPECT_NE(log.str().find("bigram baseline (add-one smoothing): val_loss"), std::string::npos);
  std::ostringstream again;
  const GptResult b = TrainGpt(SmallConfig(), again);
  EXPECT_EQ(a.val_loss, b.val_loss);
  EXPECT_EQ(a.sample, b.sample);
}

}  // namespace
}  // namespace gpt
}  // namespace tandem
