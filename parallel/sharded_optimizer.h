// Sharded optimizer state (ZeRO-1): each data-parallel worker keeps the
// optimizer state (Adam moments, SGD momentum) of only a 1/N share of the
// parameters and updates only that share; the updated parameters are then
// gathered so every replica holds all of them again.
//
//   ReducerOptions options;
//   options.shard_optimizer = true;          // --shard_optimizer: pads buckets
//   Reducer reducer(*model, worker.gradient_comms(), options);
//   auto optimizer = MakeOptimizer(config, model->Parameters());
//   reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(*optimizer));
//   ...
//   optimizer->ZeroGrad();
//   loss.Forward(reducer.Forward(x_shard), y_shard, global_batch);
//   reducer.Backward(loss.Backward());   // reduce-scatter, update, all-gather
//   // no optimizer->Step(): the hook updated and counted the step
//
// Per bucket and step (Note [Sharded step] in sharded_optimizer.cc): the
// gradient bucket is reduce-scattered in place during backward, as the
// all-reduce is without sharding, so rank r's block r of the bucket holds the
// summed gradient of its shard; rank r updates block r of the bucket's
// float32 master values (the parameters are views into one flat buffer per
// bucket, laid out as the gradients are), with state for that block alone;
// after backward every bucket's parameters are all-gathered in place: where
// the model computes in bfloat16, each rank casts its block into the
// working copies (views of one bfloat16 buffer per bucket) and those are
// gathered; elsewhere the float32 values are, and working copies cast from
// them. Every replica then computes with the same parameters as without
// sharding; in bfloat16 the float32 masters outside a rank's block are
// current only after GatherMasters. With gather_during_forward the gathers
// run on into the next forward, which waits for each layer's buckets as it
// reaches the layer (Reducer::Forward). The gradients are not sharded: after
// a step a parameter's gradient holds the reduced sum only where it lies in
// this rank's shard.
//
// With ShardedOptimizerOptions::max_grad_norm the gradient is clipped by its
// global L2 norm first: each rank sums the squares of its shards, one
// all-reduce of that scalar gives the norm, and every shard is scaled by the
// same factor before any update.
//
// Deterministic mode (--deterministic) hands the hook a DeterministicSumHook
// (parallel/deterministic_sum.h) that reduces each bucket in place of the
// reduce-scatter and leaves every rank the whole summed gradient; the norm
// is then taken over the whole gradient parameter by parameter, as the
// unsharded clipper takes it, so sharded and unsharded runs agree bitwise.
#ifndef TANDEM_PARALLEL_SHARDED_OPTIMIZER_H_
#define TANDEM_PARALLEL_SHARDED_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/lane.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/optimizer.h"
#include "parallel/comm_hook.h"
#include "parallel/communicator.h"
#include "parallel/work.h"

namespace tandem {

struct ShardedOptimizerOptions {
  // > 0: clip the gradient (every parameter together) to this global L2
  // norm before the update (--clip_grad_norm). The updates then wait for
  // every bucket's reduce-scatter and the norm's all-reduce, instead of
  // running bucket by bucket beside backward.
  float max_grad_norm = 0.f;
  // Compute the gradient's global norm every step (last_grad_norm()) even
  // without clipping: one more all-reduce of a scalar per step.
  bool track_grad_norm = false;
  // Leave the step's parameter gathers running when the step returns: each
  // layer of the next forward waits for its own parameters' buckets, so the
  // gathers of later layers run beside the forward of earlier ones. The
  // forward must then run through Reducer::Forward (the reducer refuses the
  // next step otherwise), and anything else that reads the parameters
  // between steps (an evaluation) after Reducer::WaitForParameters. Off:
  // the step returns once every gather is done.
  bool gather_during_forward = false;
};

// The comm hook that makes the reducer's optimizer step sharded. Register it
// on a Reducer built with ReducerOptions::shard_optimizer (which pads every
// bucket to a multiple of the world size); the reducer refuses it otherwise,
// and refuses a Backward with shard_optimizer but another hook. The
// optimizer must hold every parameter of the model (MakeOptimizer over its
// Parameters()), have taken no step yet, and outlive the hook; Bind shards
// its state (Optimizer::ShardState) and re-homes the parameters' values into
// the hook's flat buffers. The training loop does not call Step().
class ShardedOptimizerHook : public CommHook {
 public:
  // `reduce`: null to reduce-scatter each bucket, or a hook that sums every
  // bucket whole on every rank (DeterministicSumHook) instead.
  explicit ShardedOptimizerHook(Optimizer& optimizer, ShardedOptimizerOptions options = {},
                                std::unique_ptr<CommHook> reduce = nullptr);
  // Waits for gathers still running (gather_during_forward), which write
  // into the hook's buffers.
  ~ShardedOptimizerHook() override;
  void Bind(const std::vector<GradBucket>& buckets) override;
  // Reduce-scatters the bucket in place: block rank() gets the sum (or
  // hands it to the `reduce` hook).
  std::shared_ptr<Work> Reduce(const GradBucket& bucket, const std::vector<Lane>& ready,
                               bool timed) override;
  // Without clipping: updates this rank's shard of the bucket.
  void AfterReduce(const GradBucket& bucket, Work& work, const std::vector<Lane>& compute) override;
  // Clips and updates (with max_grad_norm), all-gathers every bucket's
  // parameters and counts the step; `lane` waits for the gathers unless
  // gather_during_forward.
  void FinishStep(const Lane& lane) override;
  // `lane`'s later work sees bucket's gathered parameters, working copies
  // included.
  void WaitForParameters(int bucket, const Lane& lane) override;
  bool ParametersPending() const override;

  // [1] on the buckets' device: the global L2 norm of the last step's
  // gradient, before clipping; undefined unless max_grad_norm > 0 or
  // track_grad_norm. Reading it (Item) waits for the device.
  const Tensor& last_grad_norm() const { return norm_; }
  // Bytes of optimizer state this worker holds: optimizer.state_bytes().
  int64_t state_bytes() const { return optimizer_.state_bytes(); }
  // Where the model computes in bfloat16 (a bucket whose every parameter
  // keeps a working copy), the step gathers the working copies, half the
  // bytes, and each rank's float32 masters are current only in its own
  // shards. GatherMasters (a collective: every rank calls it at the same
  // point, between steps) gathers the masters too; call it before reading
  // the values (a checkpoint, an export, a comparison). The Trainer does.
  void GatherMasters();
  // For checkpoints, between steps. GatherState is a collective (every rank
  // calls it at the same point): every rank gets the whole optimizer state,
  // gathered from every rank's shards, named and shaped as the unsharded
  // optimizer names it ("fc1.weight.adam_m" [out, in]), so a checkpoint of a
  // sharded run is one of an unsharded run and resumes with any worker
  // count, sharded or not. LoadState is its reverse and not a collective:
  // each rank copies its shards out of the whole state (every name
  // GatherState gives, each of its shape), wherever it was saved.
  std::vector<std::pair<std::string, Tensor>> GatherState();
  void LoadState(const std::vector<std::pair<std::string, Tensor>>& state);

  // This rank's shard of bucket b: elements [begin, end) of its buffers.
  int64_t shard_begin(int b) const { return buckets_.at(b).chunk * rank_; }
  int64_t shard_end(int b) const { return buckets_.at(b).chunk * (rank_ + 1); }

 private:
  struct Bucket {
    Tensor values;      // [elements], float32: the parameters' values are views
    // [elements] in the working dtype, where every parameter of the bucket
    // keeps a working copy (bf16) and there are 2+ ranks: their working
    // copies are views, and the step gathers this instead of `values`.
    Tensor working;
    std::shared_ptr<Work> gather;  // this step's all-gather, until waited for
    bool pending = false;          // the step's parameters not yet waited for
    Tensor grads;       // the reducer's gradient buffer
    int64_t chunk = 0;  // elements per rank
    Communicator* comm = nullptr;
    std::vector<NamedParameter> parameters;
  };

  void GatherWorkingCopiesOf(Bucket& b, Device device);
  void StartGathers(const Lane& update);
  std::shared_ptr<Work> GatherBlocks(const Bucket& b, const Tensor& buffer,
                                     CollectiveOptions options) const;
  void WaitForEveryBucket(const Lane& lane);
  // Shard i's state tensors (its SlotState), each with its suffix (".adam_m").
  std::vector<std::pair<std::string, Tensor*>> StateOfShard(size_t i);
  bool norm_wanted() const { return options_.max_grad_norm > 0.f || options_.track_grad_norm; }
  void ComputeNorm(const Lane& lane);
  void ComputeWholeNorm(const Lane& lane);
  void ClipShards(const Lane& lane);

  Optimizer& optimizer_;
  ShardedOptimizerOptions options_;
  std::unique_ptr<CommHook> reduce_;  // null: reduce-scatter
  std::vector<Bucket> buckets_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<Lane> compute_;  // backward's lanes, from the last AfterReduce
  // [1, buckets]: each shard's sum of squared gradients ([1, parameters]:
  // each parameter's, with a `reduce` hook).
  Tensor squares_;
  Tensor norm_;                // [1]
  Tensor pair_;                // [1, 2]: norm + eps, max_norm
  Tensor factor_;              // [1]
  // Some bucket gathered working copies, not masters, since the last
  // GatherMasters: the masters outside this rank's shards are stale.
  bool masters_partial_ = false;
  // Declared last: destroyed first, once the updates queued on it have run.
  OwnedLane lane_;  // where the updates run
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_SHARDED_OPTIMIZER_H_
