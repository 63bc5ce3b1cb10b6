#include "trainer/trainer.h"

#include <chrono>
#include <exception>
#include <memory>

#include "core/check.h"
#include "report/chrome_trace.h"
#include "trainer/config_check.h"
#include "trainer/worker_run.h"

namespace tandem {

namespace {

void CheckTask(const TrainTask& task) {
  TANDEM_CHECK(task.train != nullptr && task.test != nullptr)
      << "TrainTask '" << task.name << "': train and test datasets are required";
  TANDEM_CHECK(static_cast<bool>(task.build_model))
      << "TrainTask '" << task.name << "': build_model is required";
  if (task.train->size() == 0) throw UsageError(task.train->name() + " has no examples");
  if (task.test->size() == 0) throw UsageError(task.test->name() + " has no examples");
  if (task.train->feature_size() != task.test->feature_size()) {
    throw UsageError(task.train->name() + " has " + std::to_string(task.train->feature_size()) +
                     " features per example but " + task.test->name() + " has " +
                     std::to_string(task.test->feature_size()));
  }
  if (task.train->label_size() != task.test->label_size()) {
    throw UsageError(task.train->name() + " has labels of " +
                     std::to_string(task.train->label_size()) + " values but " +
                     task.test->name() + " of " + std::to_string(task.test->label_size()));
  }
  const Objective& objective = ObjectiveOf(task);
  objective.CheckData(*task.train);
  objective.CheckData(*task.test);
}

// The launch options, with --deterministic's default of one intra-op thread
// per worker: a GEMM split over another number of threads adds its partial
// products in another order, so bits agree only between runs with the same
// count (docs/parallel.md).
LaunchOptions LaunchOf(const TrainConfig& config) {
  LaunchOptions launch = config.launch;
  if (config.deterministic && launch.cpu_threads == 0) launch.cpu_threads = 1;
  return launch;
}

}  // namespace

const Objective& ObjectiveOf(const TrainTask& task) {
  static const std::shared_ptr<const Objective> classification = Classification();
  return task.objective != nullptr ? *task.objective : *classification;
}

TrainResult Train(const TrainTask& task, const TrainConfig& config, std::ostream& log) {
  CheckTask(task);
  CheckConfig(config);
  const std::optional<DirectoryLock> lock = PrepareAndLockCheckpointDir(config);
  CheckResumable(config, task.train->size());
  trainer_internal::SharedResult shared;
  const auto start = std::chrono::steady_clock::now();
  // One trace for all workers of this process (threads mode); under mpirun
  // rank 0 writes its own steps.
  std::unique_ptr<ChromeTrace> trace;
  if (!config.trace_path.empty()) trace = std::make_unique<ChromeTrace>();
  // A lone worker's error is the run's, as it is: "worker 0 failed: " would
  // add nothing, and a UsageError must stay one (the command line exits 2).
  const bool lone = config.launch.mode == LaunchMode::kThreads &&
                    config.launch.workers.value_or(1) == 1;
  std::exception_ptr lone_error;
  Launch(LaunchOf(config), [&](Worker& worker) {
    try {
      trainer_internal::WorkerRun(task, config, worker, log, trace.get(), shared).Run();
    } catch (...) {
      if (!lone) throw;
      lone_error = std::current_exception();
    }
  });
  if (lone_error) std::rethrow_exception(lone_error);
  TrainResult& result = shared.result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trace && !(config.launch.mode == LaunchMode::kMpi && !result.is_root)) {
    trace->Write(config.trace_path);  // rank 0's, under mpirun
  }
  if (!result.evals.empty()) {
    result.test_accuracy = result.evals.back().test_accuracy;
    result.test_loss = result.evals.back().test_loss;
  }
  return result;
}

}  // namespace tandem
