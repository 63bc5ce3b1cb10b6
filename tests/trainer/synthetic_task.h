// The small synthetic task the Trainer's tests train: 3 classes of 8
// features, the class being which of three feature sums is largest, so an
// MLP 8-16-3 learns it in a few epochs.
#ifndef TANDEM_TESTS_TRAINER_SYNTHETIC_TASK_H_
#define TANDEM_TESTS_TRAINER_SYNTHETIC_TASK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "layers/mlp.h"
#include "trainer/trainer.h"

namespace tandem {
namespace testing {

inline data::TensorDataset Synthetic(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n * 8), y(n);
  for (int64_t i = 0; i < n; ++i) {
    float sums[3] = {0, 0, 0};
    for (int64_t j = 0; j < 8; ++j) {
      x[i * 8 + j] = rng.Uniform() * 2 - 1;
      sums[j % 3] += x[i * 8 + j];
    }
    y[i] = static_cast<float>(std::max_element(sums, sums + 3) - sums);
  }
  return data::TensorDataset(Tensor::FromVector(x, {n, 8}), Tensor::FromVector(y, {n}), 3,
                             "synthetic");
}

// 384 training and 128 test examples, and the MLP 8-16-3 as the task's
// model (195 parameters).
struct SyntheticTask {
  data::TensorDataset train = Synthetic(384, 1), test = Synthetic(128, 2);
  TrainTask task;
  SyntheticTask() {
    task.name = "synthetic";
    task.train = &train;
    task.test = &test;
    task.build_model = [](const ModelContext& m) {
      Rng rng(m.seed);
      MlpOptions options;
      options.device = m.device;
      options.precision = m.precision;
      return Mlp({8, 16, 3}, Activation::kRelu, rng, options);
    };
  }
};

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_TRAINER_SYNTHETIC_TASK_H_
