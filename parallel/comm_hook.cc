#include "parallel/comm_hook.h"

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"

namespace tandem {

std::shared_ptr<Work> CommHook::Reduce(const GradBucket& bucket,
                                       const std::vector<Lane>& ready, bool timed) {
  CollectiveOptions options;
  options.after = ready;
  options.timed = timed;
  // See Note [Gradient averaging] in reducer.cc: a sum, not an average.
  Tensor buffer = bucket.buffer;
  return bucket.comm->AllReduce(buffer.data(), buffer.numel(), ReduceOp::kSum,
                                std::move(options));
}

OptimizerUpdateHook::OptimizerUpdateHook(Optimizer& optimizer) : optimizer_(optimizer) {}

void OptimizerUpdateHook::Bind(const std::vector<GradBucket>& buckets) {
  const std::vector<Parameter>& theirs = optimizer_.parameters();
  size_t held = 0;
  indices_.clear();
  for (const GradBucket& bucket : buckets) {
    std::vector<size_t> indices;
    for (const Parameter& p : bucket.parameters) {
      size_t j = 0;
      while (j < theirs.size() && theirs[j].value != p.value) ++j;
      TANDEM_CHECK(j < theirs.size())
          << "optimizer '" << optimizer_.Name() << "' does not hold parameter '"
          << p.name << "': build it over the model's Parameters()";
      indices.push_back(j);
    }
    held += indices.size();
    indices_.push_back(std::move(indices));
  }
  TANDEM_CHECK(held == theirs.size())
      << "optimizer '" << optimizer_.Name() << "' holds " << theirs.size()
      << " parameters but the model has " << held
      << ": build it over the model's Parameters()";
  if (!buckets.empty()) {
    lane_ = GetBackend(buckets[0].buffer.device()).NewLane({"optimizer", true});
  }
}

// See Note [Per-bucket update] in reducer.cc.
void OptimizerUpdateHook::AfterReduce(const GradBucket& bucket, Work& work,
                                      const std::vector<Lane>& compute) {
  const Lane lane = lane_.get();
  work.WaitOn(lane);
  // Backward's input-gradient GEMMs read these weights: after them.
  for (const Lane& c : compute) ops::WaitFor(lane, c);
  optimizer_.UpdateParameters(indices_.at(bucket.index), lane);
}

void OptimizerUpdateHook::FinishStep(const Lane& lane) {
  if (lane_.valid()) ops::WaitFor(lane, lane_.get());
  optimizer_.FinishStep();
}

}  // namespace tandem
