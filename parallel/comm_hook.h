// Communication hooks: what the data-parallel reducer does with a bucket of
// gradients, as PyTorch DDP's register_comm_hook.
//
// The reducer (parallel/reducer.h) calls a bucket's hook three times a step:
//   Reduce(bucket)           once its gradients are final: start reducing
//                            them and return the Work (the default sums
//                            them in place over the bucket's communicator);
//   AfterReduce(bucket, w)   once that work can be waited on without the
//                            host and no layer of this step reads the
//                            bucket's parameters any more;
//   FinishStep(lane)         once backward is over: `lane`'s later work
//                            (the next forward) must see what the hook did.
//
//   Reducer reducer(model, worker.gradient_lanes());
//   reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer));
//   ...
//   reducer.Backward(loss.Backward());   // reduces and updates every bucket
//
// Later hooks (gradient compression) plug in here, in one place for every
// transport.
#ifndef TANDEM_PARALLEL_COMM_HOOK_H_
#define TANDEM_PARALLEL_COMM_HOOK_H_

#include <memory>
#include <vector>

#include "core/lane.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/work.h"

namespace tandem {

// One bucket of the reducer: its flat gradient buffer (every gradient of
// `parameters` is a view into it) and the communicator it is reduced on.
struct GradBucket {
  int index = 0;
  Tensor buffer;                      // [elements]
  std::vector<Parameter> parameters;  // in the order they sit in `buffer`
  Communicator* comm = nullptr;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // Called once, when the hook is registered, with every bucket.
  virtual void Bind(const std::vector<GradBucket>& buckets) {}
  // Starts reducing `bucket`, whose gradients are queued on `ready` (the
  // lanes backward wrote them on). Default: an in-place sum, which with the
  // loss normalised by the global batch gives the global gradient (Note
  // [Gradient averaging] in parallel/reducer.cc).
  virtual std::shared_ptr<Work> Reduce(const GradBucket& bucket,
                                       const std::vector<Lane>& ready,
                                       bool timed);
  // `work` (Reduce's) can be waited on without the host, and backward no
  // longer reads the bucket's parameters; `compute` are backward's lanes.
  virtual void AfterReduce(const GradBucket& bucket, Work& work,
                           const std::vector<Lane>& compute) {}
  // Every bucket has passed AfterReduce: `lane` waits for the hook's work.
  virtual void FinishStep(const Lane& lane) {}
};

// Applies `optimizer` to each bucket as soon as it is reduced, on a lane of
// its own, so the updates of the last layers run beside the backward of the
// first ones (Note [Per-bucket update] in parallel/reducer.cc); then counts
// the step. The training loop does not call optimizer.Step() itself. The
// optimizer must hold every parameter of the model (MakeOptimizer over its
// Parameters()) and outlive the hook.
class OptimizerUpdateHook : public CommHook {
 public:
  explicit OptimizerUpdateHook(Optimizer& optimizer);
  void Bind(const std::vector<GradBucket>& buckets) override;
  void AfterReduce(const GradBucket& bucket, Work& work,
                   const std::vector<Lane>& compute) override;
  void FinishStep(const Lane& lane) override;

 private:
  Optimizer& optimizer_;
  std::vector<std::vector<size_t>> indices_;  // bucket -> optimizer indices
  OwnedLane lane_;                            // where the updates run
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COMM_HOOK_H_
