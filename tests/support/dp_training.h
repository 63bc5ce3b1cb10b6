// A small deterministic data-parallel training run, shared by the reducer's
// threads-mode and MPI tests: every rank trains the same MLP on its shard of
// each global batch and returns the final parameters.
//
//   ThreadGroup one(1);
//   std::vector<float> reference = TrainDataParallel(one.communicator(0), setup);
#ifndef TANDEM_TESTS_SUPPORT_DP_TRAINING_H_
#define TANDEM_TESTS_SUPPORT_DP_TRAINING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "layers/precision.h"
#include "parallel/communicator.h"

namespace tandem {
namespace testing {

struct DpSetup {
  int steps = 4;
  int64_t batch = 10;           // global batch; uneven over 3 or 4 ranks
  int64_t bucket_bytes = 256;   // small: several buckets
  bool overlap = true;
  int micro_steps = 1;          // >1: accumulate with sync off, then sync
  std::string optimizer = "sgd";
  bool per_bucket_update = false;  // OptimizerUpdateHook instead of Step
  // Gradients all-reduced as bfloat16 (BFloat16CompressionHook; inside the
  // OptimizerUpdateHook with per_bucket_update).
  bool bf16_allreduce = false;
  // The model's precision (layers/precision.h): bf16 computes in bfloat16
  // with float32 masters and gradients.
  Precision precision = Precision::kFp32;
  Device device = Device::Cpu();
  // Called after every optimizer step with this rank's parameters.
  std::function<void(int step, const std::vector<float>& params)> on_step;
};

// `comm` carries the gradients: a host communicator for CPU tensors, NCCL
// (Worker::gradient_comm) for GPU ones.
std::vector<float> TrainDataParallel(Communicator& comm, const DpSetup& setup);
// The same over several communicators ("lanes", Worker::gradient_comms()).
std::vector<float> TrainDataParallel(const std::vector<Communicator*>& lanes,
                                     const DpSetup& setup);

// max |a - b| / max(|b|, 1e-3) over elements.
double MaxRelativeDifference(const std::vector<float>& a,
                             const std::vector<float>& b);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_DP_TRAINING_H_
