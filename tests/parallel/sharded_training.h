// A small data-parallel training run with or without sharded optimizer state
// (parallel/sharded_optimizer.h), shared by the threads-mode and MPI tests of
// the sharded step: every rank trains the same MLP on its shard of each
// global batch and returns its final parameters.
//
//   ShardSetup setup;
//   setup.shard = true;
//   ShardRun run = TrainSharded(comm, setup);   // run.params, run.state_bytes
#ifndef TANDEM_TESTS_PARALLEL_SHARDED_TRAINING_H_
#define TANDEM_TESTS_PARALLEL_SHARDED_TRAINING_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layers/precision.h"
#include "parallel/communicator.h"

namespace tandem {
namespace testing {

struct ShardSetup {
  int steps = 5;
  int64_t batch = 10;          // global micro-batch; uneven over 3 or 4 ranks
  int64_t bucket_bytes = 256;  // small: several buckets
  bool overlap = true;
  int micro_steps = 1;         // >1: accumulate locally, then reduce
  std::string optimizer = "adamw";
  float weight_decay = 0.01f;
  // Sharded optimizer state: ReducerOptions::shard_optimizer and a
  // ShardedOptimizerHook; otherwise all-reduce and Step().
  bool shard = false;
  // > 0: clip the reduced gradient to this global norm (sharded: the hook's
  // max_grad_norm; unsharded: by hand on the host, in double).
  float clip = 0.f;
  std::vector<int64_t> sizes = {6, 8, 5, 3};  // the MLP's layer widths
  Precision precision = Precision::kFp32;
  // Sharded: ShardedOptimizerOptions::gather_during_forward (the forward
  // runs through Reducer::Forward either way).
  bool gather_during_forward = false;
};

struct ShardRun {
  std::vector<float> params;  // every parameter's float32 value, model order
  // Sharded: the same before ShardedOptimizerHook::GatherMasters, and every
  // working copy (widened to float32; empty where there are none) then.
  std::vector<float> params_before_gather, working;
  int64_t state_bytes = 0;    // this rank's optimizer state after training
  float last_norm = 0.f;      // the last step's gradient norm before clipping
  std::vector<int64_t> bucket_elements;
  // The whole optimizer state by name, as the unsharded optimizer names it:
  // sharded, ShardedOptimizerHook::GatherState (then loaded back with
  // LoadState and gathered again, which must give the same bits).
  std::vector<std::pair<std::string, std::vector<float>>> state;
};

ShardRun TrainSharded(Communicator& comm, const ShardSetup& setup);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_PARALLEL_SHARDED_TRAINING_H_
