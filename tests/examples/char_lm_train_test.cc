// examples/char_lm: the model's shape, the learning-rate schedule, drawing
// a token, and training on a tiny word list (the same seed gives the same
// run; the model beats the uniform guess).
#include "examples/char_lm/train.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "examples/char_lm/model.h"
#include "examples/char_lm/sample.h"
#include "layers/lr_schedule.h"

namespace tandem {
namespace char_lm {
namespace {

TEST(CharLmModel, DefaultShapeHasTheParametersCountedByHand) {
  ModelConfig config;
  config.vocab = 70;
  Rng rng(1);
  std::unique_ptr<Sequential> model = BuildCharLm(config, rng);
  const int64_t block = 2 * 256 + 2 * (256 * 256 + 256);  // LayerNorm, fc1, fc2
  EXPECT_EQ(ParameterCount(*model),
            70 * 24 + (192 * 256 + 256) + 2 * block + 2 * 256 + (256 * 70 + 70));
  Tensor logits = model->Forward(Tensor::Zeros({3, 8}));
  EXPECT_EQ(logits.shape(), (Shape{3, 70}));
  config.hidden = 0;
  EXPECT_THROW(BuildCharLm(config, rng), Error);
}

TEST(CharLmSchedule, WarmsUpThenFollowsTheCosine) {
  const LrSchedule cosine = LrSchedule::kCosine;
  EXPECT_FLOAT_EQ(WarmedUpLr(cosine, 1.f, 0, 100, 10), 0.1f * (1 + std::cos(0.f)) / 2);
  EXPECT_FLOAT_EQ(WarmedUpLr(cosine, 1.f, 9, 100, 10), (1 + std::cos(M_PI * 9 / 100)) / 2);
  EXPECT_FLOAT_EQ(WarmedUpLr(cosine, 1.f, 50, 100, 10), 0.5f);
  EXPECT_FLOAT_EQ(WarmedUpLr(cosine, 2.f, 50, 100, 0), 1.f);
}

TEST(CharLmSample, DrawTokenWalksTheCumulativeSum) {
  const float p[] = {0.25f, 0.f, 0.5f, 0.25f};
  EXPECT_EQ(DrawToken(p, 4, 0.f), 0);
  EXPECT_EQ(DrawToken(p, 4, 0.3f), 2);
  EXPECT_EQ(DrawToken(p, 4, 0.8f), 3);
  EXPECT_EQ(DrawToken(p, 4, 1.5f), 3);  // beyond the rounded sum: the last positive
}

std::string TinyWordList() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/tiny_words.txt";
  std::ofstream out(path);
  for (const char* a : {"b", "c", "d", "l", "m", "p", "r", "s", "t"}) {
    for (const char* b : {"a", "e", "i", "o", "u"}) {
      for (const char* c : {"n", "t", ""}) {
        out << a << b << c << "\n" << a << b << c << "ing\n";
      }
    }
  }
  return path;
}

CharLmConfig TinyConfig() {
  CharLmConfig config;
  config.words_path = TinyWordList();
  config.model.context = 3;
  config.model.embed = 4;
  config.model.hidden = 16;
  config.model.blocks = 1;
  config.steps = 60;
  config.eval_every = 30;
  config.batch_size = 32;
  config.optimizer.lr = 0.01f;
  config.warmup_steps = 5;
  config.samples = 4;
  return config;
}

TEST(CharLmTrain, SameSeedSameRunAndBetterThanUniform) {
  std::ostringstream log_a, log_b;
  const CharLmResult a = TrainCharLm(TinyConfig(), log_a);
  const CharLmResult b = TrainCharLm(TinyConfig(), log_b);
  ASSERT_EQ(a.evals.size(), 2u);
  EXPECT_EQ(a.evals[1].step, 60);
  EXPECT_EQ(a.val_loss, b.val_loss);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.samples.size(), 4u);
  // 14 characters + end: the uniform guess is ln 15.
  EXPECT_LT(a.val_loss, std::log(15.0) - 0.5) << log_a.str();
  EXPECT_GT(a.bigram_loss, 0.0);
  EXPECT_NE(log_a.str().find("bigram baseline (add-one smoothing): val_loss"), std::string::npos);
}

}  // namespace
}  // namespace char_lm
}  // namespace tandem
