// Communication hooks: what the data-parallel reducer does with a bucket of
// gradients, as PyTorch DDP's register_comm_hook.
//
// The reducer (parallel/reducer.h) calls a bucket's hook at these points:
//   Reduce(bucket)           once its gradients are final: start reducing
//                            them and return the Work (the default sums
//                            them in place over the bucket's communicator);
//   AfterReduce(bucket, w)   once that work can be waited on without the
//                            host and no layer of this step reads the
//                            bucket's parameters any more;
//   FinishStep(lane)         once backward is over: `lane`'s later work
//                            (the next forward, the optimizer) must see
//                            what the hook did, but for parameters it
//                            leaves changing (a sharded step's gathers),
//                            which
//   WaitForParameters(b, l)  hands over before the next forward (or
//                            backward) reads bucket b's parameters.
// With one rank the reducer reduces nothing: it calls AfterReduce and
// FinishStep, with completed work, but not Reduce.
//
//   Reducer reducer(model, worker.gradient_comms());
//   reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer));
//   ...
//   reducer.Backward(loss.Backward());   // reduces and updates every bucket
//
// Hooks compose: OptimizerUpdateHook takes the hook that reduces, so
// gradient compression and per-bucket updates work together:
//
//   reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(
//       *optimizer, std::make_unique<BFloat16CompressionHook>()));
//
// One hook serves every transport: host transports run the collectives on
// their progress thread, NCCL on its lane, and a hook orders its own lanes
// with ops::WaitFor and Work::WaitOn, never with host waits on a GPU.
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
  Tensor buffer;                      // [elements], float32
  std::vector<NamedParameter> parameters;  // in the order they sit in `buffer`
  Communicator* comm = nullptr;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // Called once, when the hook is registered, with every bucket; throws if
  // the hook cannot serve them. Every rank registers the same hook at the
  // same point, so Bind may allocate reduce buffers (which NCCL registers
  // collectively).
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
  // After AfterReduce(bucket, work): `lane`'s later work sees the bucket's
  // final (reduced, float32) gradients in bucket.buffer. For hooks that wrap
  // another (OptimizerUpdateHook). Default: work.WaitOn(lane), since the
  // default Reduce leaves the result in place.
  virtual void WaitForGradients(const GradBucket& bucket, Work& work, const Lane& lane);
  // Every bucket has passed AfterReduce: `lane` waits for the hook's work.
  virtual void FinishStep(const Lane& lane) {}
  // For a hook that changes the parameters after FinishStep returns (the
  // sharded optimizer's gathers, overlapped with the next forward): `lane`'s
  // later work must see bucket's parameters as this step leaves them. The
  // reducer calls it before a layer's forward reads the bucket
  // (Reducer::Forward) and, for every bucket, before backward.
  virtual void WaitForParameters(int bucket, const Lane& lane) {}
  // Whether some bucket's parameters are still changing (the reducer then
  // refuses a step whose forward did not run through Reducer::Forward).
  virtual bool ParametersPending() const { return false; }
};

// All-reduces gradients as bfloat16: half the bytes of float32 on the wire,
// as PyTorch DDP's bf16_compress_hook. Each bucket is cast to a bfloat16
// buffer of the hook's own, that buffer is summed over the ranks, and the
// sum is cast back into the float32 bucket, so the optimizer and everything
// else after the step read float32 gradients as with the default hook.
//
//   reducer.RegisterCommHook(std::make_unique<BFloat16CompressionHook>());
//
// When to use it: when the all-reduce is what limits the step (gradients
// large next to the compute that overlaps them, links slower than NVLink),
// and the optimizer tolerates gradients to about 3 significant digits, as
// mixed-precision training does. Each element of the reduced gradient is
// the sum of the ranks' gradients each rounded to bfloat16, rounded to
// bfloat16 once more. Each rounding is off by at most 2^-8 relative
// (bfloat16 keeps 8 significant bits), so the result is within about
// 2^-7 * sum_r |g_r| of the float32 sum: 2^-7 relative where the ranks'
// gradients share a sign, more where they cancel. The host transports add
// in float32 and round the sum once; NCCL may also round partial sums over
// more than two ranks (nccl_communicator.h). Replicas stay bitwise
// identical, since every rank casts back the same bits. Costs beside the
// rounding: a bfloat16 copy of every bucket, and two casts per bucket per
// step on lanes of the hook's own, beside backward. With one rank nothing
// is reduced and nothing is rounded.
//
// See Note [bfloat16 compression] in comm_hook.cc for how it is ordered.
class BFloat16CompressionHook : public CommHook {
 public:
  BFloat16CompressionHook() = default;
  // Allocates the bfloat16 buffers (from each bucket's communicator) and
  // the lanes; refuses buckets that are not float32.
  void Bind(const std::vector<GradBucket>& buckets) override;
  std::shared_ptr<Work> Reduce(const GradBucket& bucket, const std::vector<Lane>& ready,
                               bool timed) override;
  // Casts the reduced bfloat16 sum back into bucket.buffer.
  void AfterReduce(const GradBucket& bucket, Work& work,
                   const std::vector<Lane>& compute) override;
  void WaitForGradients(const GradBucket& bucket, Work& work, const Lane& lane) override;
  void FinishStep(const Lane& lane) override;

 private:
  enum class Stage { kIdle, kReducing, kRestored };  // a bucket, this step

  std::vector<Tensor> compressed_;  // per bucket: [elements], bfloat16
  std::vector<Stage> stage_;        // per bucket
  // Declared last: destroyed first, once the work queued on them has run,
  // before the buffers they use go back to the allocator.
  OwnedLane compress_;    // float32 -> bfloat16, after backward's lanes
  OwnedLane decompress_;  // bfloat16 -> float32, after the all-reduce
};

// Applies `optimizer` to each bucket as soon as it is reduced, on a lane of
// its own, so the updates of the last layers run beside the backward of the
// first ones (Note [Per-bucket update] in parallel/reducer.cc); then counts
// the step. The training loop does not call optimizer.Step() itself. The
// optimizer must hold every parameter of the model (MakeOptimizer over its
// Parameters()) and outlive the hook.
//
// `reduce` is the hook that reduces each bucket (its Reduce, AfterReduce and
// FinishStep run first; the update follows its WaitForGradients); null
// means the default in-place sum. The parameters are bitwise what the same
// `reduce` hook followed by optimizer.Step() gives.
class OptimizerUpdateHook : public CommHook {
 public:
  explicit OptimizerUpdateHook(Optimizer& optimizer, std::unique_ptr<CommHook> reduce = nullptr);
  void Bind(const std::vector<GradBucket>& buckets) override;
  std::shared_ptr<Work> Reduce(const GradBucket& bucket, const std::vector<Lane>& ready,
                               bool timed) override;
  void AfterReduce(const GradBucket& bucket, Work& work,
                   const std::vector<Lane>& compute) override;
  // The gradients as `reduce` left them (the update does not change them).
  void WaitForGradients(const GradBucket& bucket, Work& work, const Lane& lane) override;
  void FinishStep(const Lane& lane) override;

 private:
  Optimizer& optimizer_;
  std::unique_ptr<CommHook> reduce_;
  std::vector<std::vector<size_t>> indices_;  // bucket -> optimizer indices
  OwnedLane lane_;                            // where the updates run
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COMM_HOOK_H_
