// --log_every=N: every N-th training step, what the step did, for a row of
// the --metrics log: the loss of the global batch, the learning rate, the
// examples trained per second since the previous row (or since the epoch
// began), and the L2 norm of the gradient the step applied (all-reduced:
// the sum over workers, the same on every rank).
//
//   StepLog log(config.log_every, worker.comm, model.Parameters(), worker.device);
//   log.StartInterval();                          // as each epoch begins
//   ...  reducer.Backward(dloss);                 // a step, reduced and applied
//   std::optional<StepRow> row = log.After(optimizer.steps(), epoch, batch.size(),
//                                          step_loss, optimizer.lr());
//   if (row && worker.is_root()) report.Step(*row);
//
// Every rank calls After after every step it takes: on a logged step the
// ranks sum their losses over the host communicator (a collective), and the
// loss and the norm are read back to the host, which waits for the device
// then and only then. The gradients are read after the reducer's Backward,
// whose lane has waited for their reduction: the per-bucket optimizer
// update reads them but leaves them as they are.
#ifndef TANDEM_TRAINER_STEP_LOG_H_
#define TANDEM_TRAINER_STEP_LOG_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"
#include "parallel/communicator.h"

namespace tandem {

struct StepRow {
  int64_t step;        // the optimizer's count after the step, as the epoch rows'
  int epoch;           // from 1
  double loss;         // mean over the global batch
  double lr;           // the step's learning rate
  double samples_per_second;
  double grad_norm;    // L2 norm of every parameter's gradient together
};

class StepLog {
 public:
  // `every` > 0. `params`: the model's parameters, whose gradients the
  // reducer has laid out (so they are read where the reduction leaves them).
  StepLog(int64_t every, Communicator& comm, std::vector<NamedParameter> params, Device device);

  // Starts counting examples and time for samples_per_second.
  void StartInterval();

  // After a step of `examples` examples (the global batch) that left the
  // optimizer at `step`: the row when `step` is a multiple of `every`, else
  // nothing.
  std::optional<StepRow> After(int64_t step, int epoch, int64_t examples,
                               const Tensor& step_loss, double lr);

 private:
  using Clock = std::chrono::steady_clock;
  double GradientNorm();

  const int64_t every_;
  Communicator& comm_;
  std::vector<NamedParameter> params_;
  Tensor squares_;  // [parameters]: each gradient's sum of squares, on the device
  Clock::time_point interval_start_;
  int64_t interval_examples_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_TRAINER_STEP_LOG_H_
