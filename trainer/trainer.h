// The training loop, for any model on any Dataset: what the examples run,
// and what a user's program calls with its own model and data. The task's
// objective (trainer/objective.h) says what the labels are, the loss and the
// metric: classification (the default), next-token prediction, regression.
//
//   data::TensorDataset train = ..., test = ...;        // data/dataset.h
//   TrainTask task;
//   task.name = "Fashion-MNIST";
//   task.train = &train;
//   task.test = &test;
//   task.build_model = [](const ModelContext& m) {
//     Rng rng(m.seed);
//     MlpOptions options;
//     options.device = m.device;
//     options.precision = m.precision;
//     return Mlp({784, 512, 10}, Activation::kRelu, rng, options);
//   };
//   TrainConfig config;                                  // train_config.h
//   config.launch.workers = 2;
//   TrainResult result = Train(task, config, std::cout);
//
// Train checks the configuration (throwing UsageError, which names the
// flag), then runs one copy of the loop per worker (threads, MPI ranks, or
// GPUs: config.launch). Each step takes the next global batch of the epoch's
// shuffled order; each worker its shard, prepared on a background thread
// while the step before runs (data/prefetcher.h); the objective's loss of
// the model's output is normalised by the global batch; the reducer
// (parallel/reducer.h) all-reduces the gradients while backward runs and the
// optimizer updates each bucket as soon as it is reduced. Around the steps:
// the learning-rate schedule with warm-up, gradient accumulation and
// clipping, evaluation on the test set (each worker its shard), checkpoints
// and --resume, the NaN guard, metrics, plot, trace and progress lines, and
// StopSignals (trainer/stop_signal.h): a signal stops every worker after the
// same step, saving first. Progress goes to `log` from rank 0 only.
//
// A lone worker's error (threads mode, one worker) is thrown as it is; with
// several, as the launcher reports it ("worker <rank> failed: ...",
// parallel/launcher.h).
#ifndef TANDEM_TRAINER_TRAINER_H_
#define TANDEM_TRAINER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "layers/precision.h"
#include "layers/layer.h"
#include "parallel/launcher.h"
#include "trainer/objective.h"
#include "trainer/train_config.h"

namespace tandem {

// What the Trainer tells the task's build_model.
struct ModelContext {
  Device device;          // the worker's
  Precision precision;    // TrainConfig::precision
  uint64_t seed;          // TrainConfig::seed: the same on every worker
  int rank;               // for per-worker streams such as dropout masks
};

// What a model brings to the Trainer.
struct TrainTask {
  std::string name;                    // "Fashion-MNIST": logs, plot title
  std::string model_name;              // "MLP 784-512-10" (plot title); "": the model's Name()
  const data::Dataset* train = nullptr;
  const data::Dataset* test = nullptr;
  std::string test_name = "test";      // "val": in progress lines
  std::string about_data;              // a line rank 0 prints before training
  // What the labels are, the loss and the metric; null: Classification().
  std::shared_ptr<const Objective> objective;
  // Called once per worker; the model's parameters must not depend on the
  // rank (the reducer starts every replica from rank 0's anyway).
  // Any layer: a Sequential, a user's container, a tree of them.
  std::function<std::unique_ptr<Layer>(const ModelContext&)> build_model;
  // Optional: called on every worker after training (not after an error or
  // a signal), e.g. to sample from the model on rank 0.
  std::function<void(Layer& model, const Worker& worker)> after_training;
};

TrainResult Train(const TrainTask& task, const TrainConfig& config, std::ostream& log);

// task.objective, or Classification() where it is null.
const Objective& ObjectiveOf(const TrainTask& task);

}  // namespace tandem

#endif  // TANDEM_TRAINER_TRAINER_H_
