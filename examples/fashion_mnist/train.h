// An MLP trained on Fashion-MNIST by the Trainer (trainer/trainer.h): the
// code behind `bazel run -c opt //examples:fashion_mnist`, in a library so
// tests and benchmarks drive the same run.
//
//   FashionMnistConfig config;           // the Trainer's flags and this model's
//   config.launch.workers = 2;
//   TrainResult result = TrainFashionMnist(config, std::cout);
//   // result.test_accuracy
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "data/idx_reader.h"
#include "trainer/train_config.h"

namespace tandem {

// The Trainer's configuration plus the data and the model.
struct FashionMnistConfig : TrainConfig {
  std::string data_dir = data::kDefaultFashionMnistDir;
  std::vector<int64_t> hidden = {512, 256};
  std::string activation = "relu";
  float dropout = 0.f;
  int64_t max_train = -1;        // use only the first N examples (smoke tests)
  int64_t max_test = -1;
};

// Checks the configuration (throwing UsageError, which names the flag),
// loads and normalises the data, and trains (trainer/trainer.h says how).
TrainResult TrainFashionMnist(const FashionMnistConfig& config, std::ostream& log);

// The largest --hidden size: a layer of 65536 units already holds 4 GiB of
// float32 weights beside another such layer.
inline constexpr int64_t kMaxHiddenSize = 65536;

// Parses "512,256" (the --hidden flag); "" means no hidden layer. Throws
// UsageError for anything else (an empty item, a size out of range).
std::vector<int64_t> ParseSizes(const std::string& text);

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_TRAIN_H_
