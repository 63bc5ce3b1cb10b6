#include "examples/fashion_mnist/train.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/rng.h"
#include "data/normalize.h"
#include "layers/mlp.h"
#include "trainer/config_check.h"  // IsDirectory, ReadableFileProblem
#include "trainer/trainer.h"

namespace tandem {

std::vector<int64_t> ParseSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  if (text.empty()) return sizes;  // no hidden layer: a linear model
  std::stringstream in(text + ",");  // so a trailing comma leaves an empty item
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > kMaxHiddenSize) {
      throw UsageError("--hidden must be sizes from 1 to " + std::to_string(kMaxHiddenSize) +
                       " separated by commas (e.g. 512,256; \"\" for none), got '" + text + "'");
    }
    sizes.push_back(v);
  }
  return sizes;
}

namespace {

void Fail(const std::string& message) { throw UsageError(message); }

void CheckModelAndData(const FashionMnistConfig& c) {
  if (!(c.dropout >= 0 && c.dropout < 1)) {
    Fail("--dropout must be in [0, 1), got " + std::to_string(c.dropout));
  }
  if (c.deterministic && c.dropout > 0) {
    Fail("--dropout cannot be combined with --deterministic: each worker draws its own "
         "masks, so they would change with the number of workers");
  }
  for (const int64_t size : c.hidden) {
    if (size < 1 || size > kMaxHiddenSize) {
      Fail("--hidden sizes must be from 1 to " + std::to_string(kMaxHiddenSize) + ", got " +
           std::to_string(size));
    }
  }
  bool known = false;
  for (Activation a : kActivations) known = known || c.activation == ActivationName(a);
  if (!known) Fail("--activation=" + c.activation + " is not an activation: use " + ActivationNames());
  if (c.max_train == 0 || c.max_train < -1) {
    Fail("--max_train must be -1 (all) or at least 1, got " + std::to_string(c.max_train));
  }
  if (c.max_test == 0 || c.max_test < -1) {
    Fail("--max_test must be -1 (all) or at least 1, got " + std::to_string(c.max_test));
  }
  const std::string hint =
      ": install the data set (`sudo apt-get install dataset-fashion-mnist` on Debian) "
      "or point --data_dir at the directory holding the four Fashion-MNIST .gz files";
  if (!IsDirectory(c.data_dir)) Fail("--data_dir=" + c.data_dir + " is not a directory" + hint);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    // Looked at, not opened: opening a FIFO would block.
    const std::string path = c.data_dir + "/" + name;
    const std::string problem = ReadableFileProblem(path);
    if (!problem.empty()) Fail("--data_dir=" + c.data_dir + ": " + path + " " + problem + hint);
  }
}

}  // namespace

TrainResult TrainFashionMnist(const FashionMnistConfig& config, std::ostream& log) {
  // Every flag before the data loads (Train checks its own again), the
  // data directory last.
  CheckConfig(config);
  CheckModelAndData(config);
  data::TensorDataset train = data::LoadFashionMnist(config.data_dir, true, config.max_train);
  data::TensorDataset test = data::LoadFashionMnist(config.data_dir, false, config.max_test);
  // Statistics of the training set only, applied to both.
  const data::Normalization norm = data::ComputeNormalization(train.features);
  data::Normalize(norm, train.features);
  data::Normalize(norm, test.features);

  TrainTask task;
  task.name = "Fashion-MNIST";
  task.model_name = "MLP " + std::to_string(train.feature_size());
  for (const int64_t size : config.hidden) task.model_name += "-" + std::to_string(size);
  task.model_name += "-" + std::to_string(train.num_classes());
  task.train = &train;
  task.test = &test;
  task.objective = Classification();
  task.build_model = [&](const ModelContext& context) {
    std::vector<int64_t> sizes = {train.feature_size()};
    sizes.insert(sizes.end(), config.hidden.begin(), config.hidden.end());
    sizes.push_back(train.num_classes());
    Rng rng(context.seed);
    MlpOptions mlp;
    mlp.dropout = config.dropout;
    mlp.dropout_seed = context.seed + 1 + 1000 * context.rank;
    mlp.device = context.device;
    mlp.precision = context.precision;
    return Mlp(sizes, ParseActivation(config.activation), rng, mlp);
  };
  return Train(task, config, log);
}

}  // namespace tandem
