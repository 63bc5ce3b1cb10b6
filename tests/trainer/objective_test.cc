// The Trainer's objectives: next-token prediction over sequences and
// regression train through the same loop as classification, data-parallel
// as on one worker, and data that does not fit an objective is refused.
#include "trainer/objective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "trainer/trainer.h"

namespace tandem {
namespace {

constexpr int64_t kVocab = 5, kPositions = 6;

// [batch, positions * vocab] as [batch, positions, vocab]: what a model's
// per-position logits look like. A view each way.
class PerPosition : public Layer {
 public:
  Tensor Forward(const Tensor& x) override {
    return x.Reshape({x.dim(0), kPositions, x.dim(1) / kPositions});
  }
  Tensor Backward(const Tensor& dy) override {
    return dy.Reshape({dy.dim(0), dy.dim(1) * dy.dim(2)});
  }
  std::string Name() const override { return "per_position"; }
};

// Windows of a sequence where token t+1 follows token t in a fixed cycle
// with a random start: features [n, positions] tokens, labels [n, positions]
// the next tokens. A bigram model predicts every label.
data::TensorDataset Cycles(int64_t n, uint64_t seed) {
  const int order[kVocab] = {2, 4, 0, 3, 1};  // next token of token i: order[i]
  Rng rng(seed);
  std::vector<float> x(n * kPositions), y(n * kPositions);
  for (int64_t i = 0; i < n; ++i) {
    int token = static_cast<int>(rng.UniformInt(kVocab));
    for (int64_t t = 0; t < kPositions; ++t) {
      x[i * kPositions + t] = static_cast<float>(token);
      token = order[token];
      y[i * kPositions + t] = static_cast<float>(token);
    }
  }
  return data::TensorDataset(Tensor::FromVector(x, {n, kPositions}),
                             Tensor::FromVector(y, {n, kPositions}), kVocab, "cycles");
}

// y = x . w + 0.5 for fixed w: real-valued labels.
data::TensorDataset Linear3(int64_t n, uint64_t seed) {
  const float w[3] = {0.5f, -1.f, 2.f};
  Rng rng(seed);
  std::vector<float> x(n * 3), y(n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = 0.5f;
    for (int64_t j = 0; j < 3; ++j) {
      x[i * 3 + j] = rng.Uniform() * 2 - 1;
      y[i] += w[j] * x[i * 3 + j];
    }
  }
  return data::TensorDataset(Tensor::FromVector(x, {n, 3}), Tensor::FromVector(y, {n}), 0,
                             "linear3");
}

TrainConfig Quick(int workers) {
  TrainConfig c;
  c.epochs = 3;
  c.batch_size = 16;
  c.quiet = true;
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.5f;
  c.launch.workers = workers;
  return c;
}

struct NextTokenFixture {
  data::TensorDataset train = Cycles(256, 1), test = Cycles(64, 2);
  TrainTask task;
  NextTokenFixture() {
    task.name = "cycles";
    task.train = &train;
    task.test = &test;
    task.objective = NextToken();
    task.build_model = [](const ModelContext& m) {
      Rng rng(m.seed);
      auto model = std::make_unique<Sequential>("bigram");
      model->Add(std::make_unique<Embedding>("table", kVocab, kVocab, rng, m.device));
      model->Add(std::make_unique<PerPosition>());
      return model;
    };
  }
};

TEST(ObjectiveTest, NextTokenLearnsEveryPositionOfASequence) {
  NextTokenFixture f;
  std::ostringstream log;
  TrainConfig config = Quick(1);
  config.quiet = false;
  const TrainResult r = Train(f.task, config, log);
  ASSERT_FALSE(r.evals.empty());
  // Chance is log(5) = 1.61 nats per token.
  EXPECT_LT(r.test_loss, 0.2) << log.str();
  EXPECT_GT(r.test_accuracy, 0.99) << "accuracy over tokens";
  EXPECT_GT(r.evals.back().train_accuracy, 0.9);
  EXPECT_LE(r.evals.back().train_accuracy, 1.0) << "counted over tokens, not examples";
  EXPECT_NE(log.str().find("test_acc"), std::string::npos) << log.str();
}

TEST(ObjectiveTest, NextTokenOnTwoWorkersIsOneWorker) {
  NextTokenFixture one, two;
  std::ostringstream log;
  const TrainResult a = Train(one.task, Quick(1), log);
  const TrainResult b = Train(two.task, Quick(2), log);
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) {
    EXPECT_NEAR(a.evals[i].loss, b.evals[i].loss, 1e-5) << "evaluation " << i;
    EXPECT_NEAR(a.evals[i].test_loss, b.evals[i].test_loss, 1e-5) << "evaluation " << i;
  }
}

struct RegressionFixture {
  data::TensorDataset train = Linear3(256, 3), test = Linear3(64, 4);
  TrainTask task;
  RegressionFixture() {
    task.name = "linear3";
    task.train = &train;
    task.test = &test;
    task.objective = Regression();
    task.build_model = [](const ModelContext& m) {
      Rng rng(m.seed);
      auto model = std::make_unique<Sequential>("affine");
      LinearOptions options;
      options.device = m.device;
      model->Add(std::make_unique<Linear>("fc", 3, 1, rng, options));
      return model;
    };
  }
};

TEST(ObjectiveTest, RegressionFitsRealValuedLabelsAndReportsNoAccuracy) {
  RegressionFixture f;
  std::ostringstream log;
  TrainConfig config = Quick(2);
  config.quiet = false;
  config.optimizer.lr = 0.1f;
  config.epochs = 8;
  const TrainResult r = Train(f.task, config, log);
  ASSERT_FALSE(r.evals.empty());
  // The labels' variance is about 1.8; a fitted affine map leaves none.
  EXPECT_LT(r.test_loss, 1e-3) << log.str();
  EXPECT_TRUE(std::isnan(r.evals.back().train_accuracy));
  EXPECT_EQ(log.str().find("_acc"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("test_loss"), std::string::npos) << log.str();
}

std::string TrainError(TrainTask task) {
  std::ostringstream log;
  try {
    Train(task, Quick(1), log);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ObjectiveTest, DataThatDoesNotFitTheObjectiveIsNamed) {
  NextTokenFixture sequences;
  TrainTask task = sequences.task;
  task.objective = nullptr;  // classification
  std::string error = TrainError(task);
  EXPECT_NE(error.find("cycles: the classification objective needs one class id per example"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("use NextToken()"), std::string::npos) << error;

  RegressionFixture real;
  task = real.task;
  task.objective = NextToken();
  error = TrainError(task);
  EXPECT_NE(error.find("linear3: the next-token objective needs class (or token) ids"),
            std::string::npos)
      << error;
}

TEST(ObjectiveTest, AModelOutputOfTheWrongShapeIsNamed) {
  NextTokenFixture f;
  f.task.build_model = [](const ModelContext& m) {  // no per-position view
    Rng rng(m.seed);
    auto model = std::make_unique<Sequential>("flat");
    model->Add(std::make_unique<Embedding>("table", kVocab, kVocab, rng, m.device));
    return model;
  };
  const std::string error = TrainError(f.task);
  EXPECT_NE(error.find("next-token objective: the model's output is [16, 30] and the labels "
                       "[16, 6]; expected an output [batch, positions, vocabulary]"),
            std::string::npos)
      << error;
}

TEST(ObjectiveTest, LabelsOfTheWrongWidthAreRefusedByTheDataset) {
  try {
    data::TensorDataset bad(Tensor::Zeros({4, 2}), Tensor::Full({4, 3}, 7.f), 5, "bad.npy");
    FAIL() << "a label of 7 was accepted with 5 classes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.npy: label 7 at [0, 0] is not a class index"),
              std::string::npos)
        << e.what();
  }
  data::TensorDataset ok(Tensor::Zeros({4, 2}), Tensor::Full({4, 3}, -0.25f), 0, "real.npy");
  EXPECT_EQ(ok.label_size(), 3);
  Tensor x = Tensor::Empty({2, 2}), y = Tensor::Empty({2});
  try {
    ok.Gather({0, 1}, x, y);
    FAIL() << "labels [2] accepted for labels of 3 values";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("real.npy: Gather: labels is [2] float32 on cpu, "
                                         "expected [rows, 3]"),
              std::string::npos)
        << e.what();
  }
  y = Tensor::Empty({2, 3});
  ok.Gather({3, 1}, x, y);
  EXPECT_EQ(y.ToVector(), std::vector<float>(6, -0.25f));
}

}  // namespace
}  // namespace tandem
