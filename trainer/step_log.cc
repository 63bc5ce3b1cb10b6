#include "trainer/step_log.h"

#include <cmath>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

StepLog::StepLog(int64_t every, Communicator& comm, std::vector<NamedParameter> params,
                 Device device)
    : every_(every), comm_(comm), params_(std::move(params)) {
  TANDEM_CHECK(every_ > 0) << "StepLog: --log_every must be positive, got " << every_;
  squares_ = Tensor::Zeros({static_cast<int64_t>(params_.size())}, device);
  StartInterval();
}

void StepLog::StartInterval() {
  interval_start_ = Clock::now();
  interval_examples_ = 0;
}

std::optional<StepRow> StepLog::After(int64_t step, int epoch, int64_t examples,
                                      const Tensor& step_loss, double lr) {
  interval_examples_ += examples;
  if (step % every_ != 0) return std::nullopt;
  // Each rank's loss is its shard's share of the global batch's mean (Note
  // [Gradient averaging] in parallel/reducer.cc): their sum is the mean.
  float loss = step_loss.Item();  // waits for the device: the step is done
  comm_.AllReduce(&loss, 1, ReduceOp::kSum)->Wait();
  StepRow row;
  row.step = step;
  row.epoch = epoch + 1;
  row.loss = loss;
  row.lr = lr;
  row.grad_norm = GradientNorm();
  const double seconds = std::chrono::duration<double>(Clock::now() - interval_start_).count();
  row.samples_per_second = seconds > 0 ? interval_examples_ / seconds : 0.0;
  StartInterval();
  return row;
}

// On the main lane, where the reducer's Backward left the reduced
// gradients; one read back for all of them.
double StepLog::GradientNorm() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor out = squares_.Slice(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);
    const Tensor& grad = params_[i].grad();
    if (grad.defined()) {
      ops::SumOfSquares(grad, out);
    } else {
      ops::Fill(out, 0.f);  // none this step
    }
  }
  double total = 0.0;
  for (const float s : squares_.ToVector()) total += s;
  return std::sqrt(total);
}

}  // namespace tandem
