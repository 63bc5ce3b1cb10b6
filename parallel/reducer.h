// The data-parallel reducer: keeps replicas identical by reducing gradients
// over the workers, overlapped with backward compute.
//
//   Reducer reducer(model, worker.gradient_comms());  // broadcasts rank 0's parameters
//   Tensor logits = model.Forward(x_shard);
//   loss.Forward(logits, y_shard, global_batch);  // normalise by the GLOBAL batch
//   optimizer.ZeroGrad();
//   reducer.Backward(loss.Backward());            // backward + all-reduce
//   optimizer.Step();
//
// Or, with the optimizer applied to each bucket as soon as it is reduced
// (parallel/comm_hook.h), instead of the last two calls:
//   reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(optimizer));
//   optimizer.ZeroGrad();
//   reducer.Backward(loss.Backward());            // backward + all-reduce + update
//
// Or, with each worker keeping the optimizer state of 1/N of the parameters
// (ZeRO-1: ReducerOptions::shard_optimizer and parallel/sharded_optimizer.h):
//   reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(optimizer));
//
// The model is any layer: a Sequential, a user's container, a tree of them.
// How it works: parameters are laid out in buckets in reverse model order
// (the order backward produces their gradients), and each gradient tensor is
// re-homed as a view into its bucket's flat buffer, so a bucket is reduced in
// place with no copies. The model's backward reports each layer, at any
// depth, as its gradients are queued (LayerHooks in layers/layer.h); when the
// last gradient of a bucket is, the bucket's comm hook starts reducing it (a
// Work, parallel/work.h) while backward continues on earlier layers.
// Every transport takes the same path: host transports reduce on their
// progress thread, NCCL on its lane; at the end the caller's lane waits for
// every bucket (on the host for host transports, on the device for NCCL).
// See Note [Bucket order] and Note [Gradient averaging] in reducer.cc.
#ifndef TANDEM_PARALLEL_REDUCER_H_
#define TANDEM_PARALLEL_REDUCER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"
#include "parallel/comm_hook.h"
#include "parallel/communicator.h"

namespace tandem {

struct ReducerOptions {
  // Target bucket size: a bucket closes with the parameter that makes it
  // reach this many bytes (so buckets can be larger; a large parameter may
  // share its bucket with the small ones backward finished just before it).
  int64_t bucket_bytes = 4 << 20;
  // false: reduce every bucket after backward ends (for measurement).
  bool overlap = true;
  // On GPUs: backward's GEMMs that may run beside reductions (from the
  // first bucket's launch to the end of backward) are planned for this many
  // fewer SMs, which NCCL's kernels hold meanwhile (Lane::WithGemmReserve;
  // Note [GEMM reserve]). 0: GEMMs plan for the whole device.
  int gemm_reserve = 16;
  // With 2+ ranks and overlap: the first this many layers of the model that
  // have parameters of their own (from the input side, at any depth) compute their parameter gradients
  // before their input gradient, on the main lane, so that the reduction of
  // the gradients backward reaches last runs beside the rest of backward
  // instead of after it (Note [Gradients first] in reducer.cc). 0: every
  // layer computes them beside its input gradient.
  int gradients_first_layers = 2;
  // Sharded optimizer state (ZeRO-1, --shard_optimizer): every bucket is
  // padded with zeros to a multiple of the world size, so that each rank
  // owns an equal block of it, and a ShardedOptimizerHook
  // (parallel/sharded_optimizer.h) must be registered before Backward. The
  // buckets are then reduce-scattered instead of all-reduced, each rank
  // updates its block, and the parameters are all-gathered after backward.
  // An update inside Backward (BackwardArgs::update) is refused.
  bool shard_optimizer = false;
};

// Timeline of one step, on the steady clock, for tests and traces.
struct ReducerTimeline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point backward_start;
  // Per layer with parameters of its own, in model order (ParameterLayers):
  // its Backward returned.
  std::vector<Clock::time_point> layer_done;
  std::vector<Clock::time_point> bucket_start;  // per bucket: reduction issued
  Clock::time_point backward_end;               // model backward finished
  Clock::time_point step_end;                   // every bucket waited for
  // Each bucket's reduction; in a step run with CollectiveTiming::kTimed,
  // Work::started() and finished() say when it ran on its lane.
  std::vector<std::shared_ptr<Work>> bucket_work;
};

// What a Reducer's Backward does with the gradients: reduce them across
// the workers (and run the hook), or only accumulate them locally.
enum class GradientSync { kReduce, kAccumulateLocally };

// Whether a step's reductions carry timing events (ReducerTimeline::
// bucket_work's Work::started() and finished()): for traces and benchmarks,
// at the cost of an event pair per bucket.
enum class CollectiveTiming { kUntimed, kTimed };

class Reducer {
 public:
  // `comms`: communicators over the same ranks (Worker::gradient_comms());
  // bucket b goes to comms[b % comms.size()], so consecutive buckets'
  // reductions can run at once (Note [Communicators]). comms[0] also broadcasts the
  // initial parameters.
  Reducer(Layer& model, std::vector<Communicator*> comms, ReducerOptions options = {});
  Reducer(Layer& model, Communicator& comm, ReducerOptions options = {});
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Runs the model's forward. With a hook that leaves parameters changing
  // after a step (ShardedOptimizerOptions::gather_during_forward), each
  // layer first waits for its parameters' buckets (CommHook::
  // WaitForParameters), so the later layers' gathers run beside the forward
  // of the first ones; otherwise it is model.ForwardWith(x, args).
  // args.hooks (a trace, say) hear of every layer as without the reducer.
  Tensor Forward(const Tensor& x);
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args);
  // The main lane of the model's device sees every parameter as the last
  // step left it: before reading them outside Forward and Backward (an
  // evaluation's forward, a comparison) while a hook may still be changing
  // them.
  void WaitForParameters();

  // Runs the model's backward from dloss on its device's lanes, without the
  // input gradient (the model's input is data), and reduces the gradients;
  // with GradientSync::kAccumulateLocally (gradient accumulation: every
  // micro-step but the last) it only adds into the local gradients: no
  // collective, no hook. Returns an undefined Tensor.
  Tensor Backward(const Tensor& dloss, GradientSync sync = GradientSync::kReduce);
  // The same with the caller's arguments (BackwardArgs::update is refused
  // with more than one rank); returns the input gradient when
  // args.input_grad. On return, args.lane's later work sees the reduced
  // gradients (and the hook's updates). args.hooks (a trace, say) hears of
  // every layer as the reducer does (LayerHooks in layers/layer.h).
  // `timing`: kTimed asks for timing events on this step's reductions.
  Tensor BackwardWith(const Tensor& dloss, const BackwardArgs& args,
                      GradientSync sync = GradientSync::kReduce,
                      CollectiveTiming timing = CollectiveTiming::kUntimed);

  // Replaces the default hook (an in-place sum); see parallel/comm_hook.h.
  // With ReducerOptions::shard_optimizer only a ShardedOptimizerHook, and
  // that hook only then.
  void RegisterCommHook(std::unique_ptr<CommHook> hook);
  const ReducerOptions& options() const { return options_; }

  int num_comms() const { return static_cast<int>(comms_.size()); }

  // Copies rank 0's parameters to every rank (done at construction).
  void BroadcastParameters();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Parameter names in bucket b, in the order they were laid out.
  std::vector<std::string> BucketParameterNames(int b) const;
  // Elements of bucket b's buffer: its parameters', plus padding with
  // ReducerOptions::shard_optimizer.
  int64_t bucket_elements(int b) const { return buckets_[b].buffer.numel(); }
  // The layers with parameters of their own, in model order: what
  // ReducerTimeline::layer_done and gradients_first_layers count.
  const std::vector<Layer*>& parameter_layers() const { return owners_; }
  // Seconds the host waited for reductions after the model's backward
  // finished, in the last step (0 when only lanes waited, as on GPUs).
  double last_comm_wait_seconds() const { return last_comm_wait_; }
  const ReducerTimeline& last_timeline() const { return timeline_; }

 private:
  struct BucketState {
    int pending = 0;  // its gradients not yet queued this step
    int running = 0;  // its parameters whose layer's Backward has not returned
  };
  // Per parameter, this step: reported ready, reported done (a parameter may
  // be reported more than once, Note [Reports from the tree]).
  struct ParamState {
    bool ready = false;
    bool done = false;
  };

  void CollectParameters();
  void BuildBuckets();
  void ChooseGradientsFirstLayers();
  void StartStep(const BackwardArgs& args);
  LayerHooks StepHooks(const LayerHooks* caller);
  void MarkParameters(Layer& layer, bool ParamState::*flag, int BucketState::*count);
  void PrepareLayer(Layer& layer, BackwardArgs& args) const;
  void OnParamsReady(Layer& layer);
  void OnLayerDone(Layer& layer);
  void LaunchReadyBuckets();
  void AfterReduceReadyBuckets(bool block);
  void FinishBuckets(const Lane& lane);
  // `lane` sees the parameters of `layer` and below (of the model itself
  // only, with `own`) as the hook leaves them.
  void WaitForParametersOf(Layer& layer, const Lane& lane);
  void WaitForOwnParameters(const Lane& lane);
  void WaitForEveryBucket(const Lane& lane);
  void WaitBeforeBackward(const Lane& lane);

  Layer& model_;
  Communicator& comm_;                   // comms_[0]
  std::vector<Communicator*> comms_;  // buckets round-robin over these
  ReducerOptions options_;
  std::unique_ptr<CommHook> hook_;
  bool hook_shards_ = false;  // hook_ is a ShardedOptimizerHook

  std::vector<NamedParameter> params_;                 // model order
  std::vector<size_t> param_owner_;               // param index -> owners_ index
  std::vector<int> param_bucket_;                 // param index -> bucket
  std::vector<Layer*> owners_;                    // layers with parameters of their own
  std::unordered_map<const Layer*, size_t> owner_index_;
  // Every layer of the tree with parameters -> theirs and its children's.
  std::unordered_map<const Layer*, std::vector<size_t>> layer_params_;
  std::vector<GradBucket> buckets_;
  std::vector<bool> gradients_first_;             // per owner
  size_t first_bucket_layer_ = 0;  // the owner whose gradients complete bucket 0

  // This step. See Note [Bucket order].
  std::vector<BucketState> state_;
  std::vector<ParamState> param_state_;
  std::vector<std::shared_ptr<Work>> works_;
  std::vector<Lane> compute_lanes_;  // backward's lane and parameter lane
  bool reserve_gemms_ = false;       // See Note [GEMM reserve]
  bool timed_ = false;               // CollectiveTiming::kTimed
  int next_to_launch_ = 0;
  int next_after_reduce_ = 0;

  // Forward ran since the last step's hook left parameters pending.
  bool forwarded_ = false;

  double last_comm_wait_ = 0.0;
  ReducerTimeline timeline_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_REDUCER_H_
