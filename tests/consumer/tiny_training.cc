#include "tiny_training.h"

#include <sstream>

#include "core/rng.h"
#include "data/dataset.h"
#include "layers/mlp.h"
#include "trainer/trainer.h"

namespace consumer {
namespace {

using namespace tandem;

constexpr int64_t kFeatures = 8;
constexpr int64_t kClasses = 4;

// Normal points; the class is the quadrant of their first two coordinates.
data::TensorDataset MakeData(int64_t examples, uint64_t seed, const std::string& name) {
  Rng rng(seed);
  std::vector<float> xs(examples * kFeatures), ys(examples);
  for (int64_t i = 0; i < examples; ++i) {
    for (int64_t j = 0; j < kFeatures; ++j) xs[i * kFeatures + j] = rng.Normal();
    ys[i] = static_cast<float>((xs[i * kFeatures] > 0) * 2 + (xs[i * kFeatures + 1] > 0));
  }
  return data::TensorDataset(Tensor::FromVector(xs, {examples, kFeatures}),
                             Tensor::FromVector(ys, {examples}), kClasses, name);
}

}  // namespace

TinyResult TrainTinyMlp(const TinyTrainingOptions& options) {
  const data::TensorDataset train = MakeData(512, 1, "synthetic train");
  const data::TensorDataset test = MakeData(256, 2, "synthetic test");
  TrainTask task;
  task.name = "quadrants";
  task.train = &train;
  task.test = &test;
  task.build_model = [](const ModelContext& context) {
    Rng rng(context.seed);
    MlpOptions mlp;
    mlp.device = context.device;
    mlp.precision = context.precision;
    return Mlp({kFeatures, 32, kClasses}, Activation::kRelu, rng, mlp);
  };
  TrainConfig config;
  config.epochs = options.epochs;
  config.batch_size = 64;
  config.optimizer.lr = 2e-2f;  // AdamW
  config.launch.workers = options.workers;
  config.launch.device = options.device;
  config.quiet = true;
  std::ostringstream log;
  const TrainResult trained = Train(task, config, log);
  TinyResult result;
  for (const EvalStats& eval : trained.evals) result.test_losses.push_back(eval.test_loss);
  result.test_accuracy = trained.test_accuracy;
  result.parameters = trained.parameters;
  return result;
}

}  // namespace consumer
