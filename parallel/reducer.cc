#include "parallel/reducer.h"

#include <algorithm>
#include <functional>
#include <string>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/profile_range.h"
#include "parallel/sharded_optimizer.h"

namespace tandem {

// Note [Bucket order]
// Buckets hold parameters in reverse layer order, the order in which backward
// finishes their gradients, so the first bucket is ready first. Buckets are
// launched strictly in index order (bucket k only after buckets 0..k-1), even
// if a later one happens to be ready first: every rank then issues the same
// collectives in the same order, which collectives require. PyTorch's
// reducer follows the same rule. AfterReduce follows the same order.
//
// Note [Gradient averaging]
// The loss is normalised by the global batch size (Loss::Forward's `examples`)
// rather than by each worker's shard, and the reducer SUMS gradients. The sum
// of per-shard gradients of sum(loss_i) / global_batch is exactly the gradient
// of the global-batch mean, even when the last batch splits unevenly (a
// per-rank mean followed by an average over ranks would weight a 3-example
// shard like a 4-example one).
//
// Note [Communicators]
// Calls on one communicator run one after another, and one call does not
// reach the bandwidth of a larger one: each fills and drains its pipeline.
// So buckets go round-robin over the communicators given; consecutive
// buckets' reductions can then overlap. Every rank issues bucket b on the
// same communicator in the same order, which is all NCCL asks of concurrent
// communicators.
//
// Note [GEMM reserve]
// NCCL's kernels hold SMs (one per channel) for as long as they run. A GEMM
// that cuBLAS planned for every SM then runs part of its work as a straggling
// extra wave on the SMs left. So from the launch of the first bucket to the
// end of backward, the reducer hands each layer lanes whose GEMMs are planned
// for `gemm_reserve` fewer SMs (Lane::WithGemmReserve). The first bucket
// launches when the layer `first_bucket_layer_` has queued its parameter
// gradients, so that layer's input-gradient GEMM is the first reserved one.
//
// Note [Gradients first]
// Backward reaches the layers nearest the input last, so their buckets'
// reductions are the ones left running after it. A layer computes its
// parameter gradients on the parameter lane, beside its input-gradient GEMM;
// the two share the SMs and end together, so the bucket's reduction could
// start only when the input gradient is done too. For the first
// `gradients_first_layers` layers with parameters the reducer passes one lane
// for both: the parameter gradients come first, and their reduction runs
// beside the input-gradient GEMM and the rest of backward. The price is the
// overlap of that layer's two GEMMs, so only a few layers take it. The
// gradients are the same GEMM's either way, so results do not change.
//
// Note [Per-bucket update]
// OptimizerUpdateHook updates a bucket's parameters right behind its
// reduction, on a lane of its own, instead of in one pass after backward.
// The update is queued once every layer of the bucket has returned from
// Backward (its reduction may start earlier), ordered after backward's lanes
// as they stand then, since the layers' input-gradient GEMMs read the
// weights, and after them nothing of this step does. Reductions queued later
// do not wait for it. At the end the caller's lane waits for the update lane,
// so the next forward sees the updates. The updates of all but the last
// bucket run beside backward. The optimizer's kernels are the ones Step would
// queue, on the same data, so the result is bitwise the same.

namespace {
Communicator& FirstComm(const std::vector<Communicator*>& comms) {
  TANDEM_CHECK(!comms.empty() && comms[0] != nullptr)
      << "Reducer needs at least one communicator";
  return *comms[0];
}
}  // namespace

Reducer::Reducer(Layer& model, Communicator& comm, ReducerOptions options)
    : Reducer(model, std::vector<Communicator*>{&comm}, options) {}

Reducer::Reducer(Layer& model, std::vector<Communicator*> comms, ReducerOptions options)
    : model_(model),
      comm_(FirstComm(comms)),
      comms_(std::move(comms)),
      options_(options),
      hook_(std::make_unique<CommHook>()) {
  TANDEM_CHECK(options.gemm_reserve >= 0)
      << "ReducerOptions::gemm_reserve is " << options.gemm_reserve
      << ": it counts multiprocessors left to NCCL, so 0 (none) or more";
  TANDEM_CHECK(options.gradients_first_layers >= 0)
      << "ReducerOptions::gradients_first_layers is " << options.gradients_first_layers
      << ": it counts layers, so 0 (none) or more";
  TANDEM_CHECK(options.bucket_bytes > 0)
      << "--bucket_mb must be positive, got " << options.bucket_bytes << " bytes";
  for (Communicator* comm : comms_) {
    TANDEM_CHECK(comm != nullptr && comm->rank() == comm_.rank() &&
                 comm->size() == comm_.size())
        << "Reducer communicators must span the same ranks: communicator 0 is " << comm_.Describe()
        << ", another is " << (comm ? comm->Describe() : std::string("null"));
  }
  CollectParameters();
  BuildBuckets();
  ChooseGradientsFirstLayers();
  BroadcastParameters();
}

// Walks the model's tree once: each parameter's owner is the deepest layer
// that lists it (a layer with parameters of its own), and every layer with
// parameters maps to all of its own and its children's, which is what a
// report of that layer covers (Note [Reports from the tree] in layers/layer.h).
void Reducer::CollectParameters() {
  params_ = model_.Parameters();
  std::unordered_map<const Parameter*, size_t> index;  // parameter -> its index
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].parameter] = i;
  std::vector<Layer*> owner(params_.size(), nullptr);
  std::function<void(Layer&)> visit = [&](Layer& layer) {
    std::vector<size_t> covered;
    for (const NamedParameter& p : layer.Parameters()) {
      const auto found = index.find(p.parameter);
      TANDEM_CHECK(found != index.end())
          << "model '" << model_.Name() << "': layer " << layer.Describe()
          << " lists parameter '" << p.name << "', which the model's Parameters() do not "
          << "give: a container must list every layer it holds in Children()";
      covered.push_back(found->second);
      owner[found->second] = &layer;  // a child, visited later, takes it over
    }
    if (!covered.empty()) layer_params_[&layer] = std::move(covered);
    for (Layer* child : layer.Children()) visit(*child);
  };
  visit(model_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto inserted = owner_index_.emplace(owner[i], owners_.size());
    if (inserted.second) owners_.push_back(owner[i]);
    param_owner_.push_back(inserted.first->second);
  }
}

void Reducer::BuildBuckets() {
  param_bucket_.assign(params_.size(), -1);
  // A bucket closes once it holds bucket_bytes or more, the parameter that
  // crossed the line included (PyTorch DDP's rule): closing before it would
  // give a layer's bias, which backward finishes just before its weight, a
  // collective of its own.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  bool open = false;
  for (size_t i = params_.size(); i-- > 0;) {
    if (!open) {
      groups.emplace_back();
      bytes = 0;
      open = true;
    }
    groups.back().push_back(i);
    bytes += params_[i].value().numel() * static_cast<int64_t>(sizeof(float));
    if (bytes >= options_.bucket_bytes) open = false;
  }
  for (const std::vector<size_t>& group : groups) {
    GradBucket bucket;
    bucket.index = static_cast<int>(buckets_.size());
    bucket.comm = comms_[buckets_.size() % comms_.size()];
    int64_t elements = 0;
    for (size_t i : group) elements += params_[i].value().numel();
    // See Note [Sharded step] in sharded_optimizer.cc: equal blocks per rank.
    const int64_t parameter_elements = elements;
    if (options_.shard_optimizer) {
      const int64_t ranks = comm_.size();
      elements = (elements + ranks - 1) / ranks * ranks;
    }
    const Device device = params_[group.front()].value().device();
    // One rank reduces nothing: any memory will do.
    bucket.buffer = comm_.size() == 1 ? Tensor::Zeros({elements}, device)
                                      : bucket.comm->NewReduceBuffer(elements, device);
    int64_t offset = 0;
    for (size_t i : group) {
      NamedParameter& p = params_[i];
      TANDEM_CHECK(p.value().device() == device)
          << "parameter '" << p.name << "' is on " << p.value().device() << " but '"
          << params_[group.front()].name << "' is on " << device
          << ": a replica's parameters must share one device";
      const int64_t n = p.value().numel();
      // The layer now accumulates straight into the bucket (zeros where it
      // kept no gradient: updated in Backward last time).
      p.parameter->MoveGradInto(
          bucket.buffer.Slice(offset, offset + n).Reshape(p.value().shape()), p.name);
      param_bucket_[i] = bucket.index;
      bucket.parameters.push_back(p);
      offset += n;
    }
    TANDEM_CHECK(offset == parameter_elements) << "bucket " << bucket.index << " lost elements";
    buckets_.push_back(std::move(bucket));
  }
  first_bucket_layer_ = owners_.size();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_bucket_[i] == 0) {
      first_bucket_layer_ = std::min(first_bucket_layer_, param_owner_[i]);
    }
  }
}

// See Note [Gradients first].
void Reducer::ChooseGradientsFirstLayers() {
  gradients_first_.assign(owners_.size(), false);
  if (comm_.size() == 1 || !options_.overlap) return;
  const size_t chosen =
      std::min(owners_.size(), static_cast<size_t>(options_.gradients_first_layers));
  std::fill(gradients_first_.begin(), gradients_first_.begin() + chosen, true);
}

void Reducer::RegisterCommHook(std::unique_ptr<CommHook> hook) {
  TANDEM_CHECK(hook != nullptr) << "Reducer::RegisterCommHook(nullptr)";
  const bool shards = dynamic_cast<ShardedOptimizerHook*>(hook.get()) != nullptr;
  TANDEM_CHECK(shards == options_.shard_optimizer)
      << "model '" << model_.Name() << "': "
      << (shards ? "a ShardedOptimizerHook needs a Reducer built with "
                   "ReducerOptions::shard_optimizer (--shard_optimizer), whose buckets are "
                   "padded to a multiple of the world size"
                 : "with ReducerOptions::shard_optimizer (--shard_optimizer) the hook must be "
                   "a ShardedOptimizerHook: sharded optimizer state does not combine with "
                   "other comm hooks (bfloat16 compression, OptimizerUpdateHook)");
  hook->Bind(buckets_);
  hook_ = std::move(hook);
  hook_shards_ = shards;
}

std::vector<std::string> Reducer::BucketParameterNames(int b) const {
  std::vector<std::string> names;
  for (const NamedParameter& p : buckets_.at(b).parameters) names.push_back(p.name);
  return names;
}

void Reducer::BroadcastParameters() {
  if (comm_.size() == 1) return;
  for (NamedParameter& p : params_) {
    comm_.Broadcast(p.value().data(), p.value().numel(), /*root=*/0)->Wait();
  }
  SyncWorkingCopies(model_);  // rank 0's masters, in the working dtype too
}

Tensor Reducer::Forward(const Tensor& x) { return ForwardWith(x, ForwardArgs()); }

Tensor Reducer::ForwardWith(const Tensor& x, const ForwardArgs& args) {
  forwarded_ = true;
  if (!hook_ || !hook_->ParametersPending()) return model_.ForwardWith(x, args);
  const Lane lane = MainLane(params_[0].value().device());
  const LayerHooks none;
  const LayerHooks& theirs = args.hooks != nullptr ? *args.hooks : none;
  LayerHooks hooks = theirs;
  hooks.before_forward = [this, &theirs, &lane](Layer& layer) {
    WaitForParametersOf(layer, lane);
    if (theirs.before_forward) theirs.before_forward(layer);
  };
  WaitForOwnParameters(lane);
  ForwardArgs model_args = args;
  model_args.hooks = &hooks;
  return model_.ForwardWith(x, model_args);
}

void Reducer::WaitForParametersOf(Layer& layer, const Lane& lane) {
  const auto found = layer_params_.find(&layer);
  if (found == layer_params_.end()) return;
  for (size_t i : found->second) hook_->WaitForParameters(param_bucket_[i], lane);
}

// The parameters of the model itself, which no child's before_forward
// covers (all of them, for a model that is one layer).
void Reducer::WaitForOwnParameters(const Lane& lane) {
  const auto found = owner_index_.find(&model_);
  if (found == owner_index_.end()) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_owner_[i] == found->second) hook_->WaitForParameters(param_bucket_[i], lane);
  }
}

void Reducer::WaitForParameters() {
  if (!hook_ || params_.empty()) return;
  WaitForEveryBucket(MainLane(params_[0].value().device()));
}

void Reducer::WaitForEveryBucket(const Lane& lane) {
  for (int b = num_buckets(); b-- > 0;) hook_->WaitForParameters(b, lane);
}

// Backward reads the parameters too; a forward outside Forward read them
// while the hook was still changing them.
void Reducer::WaitBeforeBackward(const Lane& lane) {
  if (!hook_ || !hook_->ParametersPending()) return;
  TANDEM_CHECK(forwarded_)
      << "model '" << model_.Name() << "': the last step left its parameters gathering "
      << "beside the next forward (ShardedOptimizerOptions::gather_during_forward), but this "
      << "step's forward did not run through Reducer::Forward, so it read parameters still "
      << "being gathered; run the forward with reducer.Forward(x), or call "
      << "reducer.WaitForParameters() before the model's own Forward";
  WaitForEveryBucket(lane);
}

Tensor Reducer::Backward(const Tensor& dloss, GradientSync sync) {
  BackwardArgs args = BackwardArgs::For(dloss.device());
  args.input_grad = false;
  return BackwardWith(dloss, args, sync);
}

Tensor Reducer::BackwardWith(const Tensor& dloss, const BackwardArgs& args, GradientSync sync,
                             CollectiveTiming timing) {
  TANDEM_CHECK(args.update == nullptr || comm_.size() == 1)
      << "model '" << model_.Name() << "': an update inside Backward "
      << "(BackwardArgs::update) keeps no gradients to reduce over "
      << comm_.size() << " workers; step the optimizer after the reducer, or "
      << "register an OptimizerUpdateHook";
  TANDEM_CHECK(args.update == nullptr || !options_.shard_optimizer)
      << "model '" << model_.Name() << "': an update inside Backward "
      << "(BackwardArgs::update) cannot serve sharded optimizer state "
      << "(ReducerOptions::shard_optimizer, --shard_optimizer): each worker updates only "
      << "its shard, once the gradient is reduce-scattered; leave BackwardArgs::update null "
      << "(Sgd::in_backward() is null once the optimizer is sharded)";
  TANDEM_CHECK(hook_shards_ == options_.shard_optimizer)
      << "model '" << model_.Name() << "': ReducerOptions::shard_optimizer "
      << "(--shard_optimizer) is on but no ShardedOptimizerHook is registered: "
      << "reducer.RegisterCommHook(std::make_unique<ShardedOptimizerHook>(*optimizer)) "
      << "before the first Backward";
  WaitBeforeBackward(args.lane);
  // The model itself is reported too (BackwardReported), so a model that
  // reports nothing below it still does.
  if (sync == GradientSync::kAccumulateLocally) {
    Tensor dx = BackwardReported(model_, dloss, args);  // the caller's hooks only
    if (args.on_params_ready) args.on_params_ready();
    return dx;
  }
  timed_ = timing == CollectiveTiming::kTimed;
  StartStep(args);
  const LayerHooks hooks = StepHooks(args.hooks);
  BackwardArgs model_args = args;
  model_args.hooks = &hooks;
  Tensor dx = BackwardReported(model_, dloss, model_args);
  timeline_.backward_end = ReducerTimeline::Clock::now();
  LaunchReadyBuckets();  // without overlap: every bucket, now
  FinishBuckets(args.lane);
  if (args.on_params_ready) args.on_params_ready();
  return dx;
}

// The reducer's hooks for a step, each calling `caller`'s (the caller's
// args.hooks: a trace, say) too: the caller's prepare_backward first, the
// caller hearing of a layer before the reducer acts on its return.
LayerHooks Reducer::StepHooks(const LayerHooks* caller) {
  const LayerHooks none;
  const LayerHooks& theirs = caller != nullptr ? *caller : none;
  LayerHooks hooks;
  hooks.prepare_backward = [this, theirs](Layer& layer, BackwardArgs& a) {
    if (theirs.prepare_backward) theirs.prepare_backward(layer, a);
    PrepareLayer(layer, a);
  };
  hooks.on_params_ready = [this, theirs](Layer& layer) {
    OnParamsReady(layer);
    if (theirs.on_params_ready) theirs.on_params_ready(layer);
  };
  hooks.on_backward_done = [this, theirs](Layer& layer) {
    if (theirs.on_backward_done) theirs.on_backward_done(layer);
    OnLayerDone(layer);
  };
  return hooks;
}

// Marks each parameter of `layer` (and below) in `flag` once, counting it
// off its bucket's `count`.
void Reducer::MarkParameters(Layer& layer, bool ParamState::*flag, int BucketState::*count) {
  const auto found = layer_params_.find(&layer);
  if (found == layer_params_.end()) return;
  for (size_t i : found->second) {
    if (param_state_[i].*flag) continue;
    param_state_[i].*flag = true;
    --(state_[param_bucket_[i]].*count);
  }
}

void Reducer::StartStep(const BackwardArgs& args) {
  using Clock = ReducerTimeline::Clock;
  timeline_ = ReducerTimeline();
  timeline_.backward_start = Clock::now();
  timeline_.layer_done.assign(owners_.size(), Clock::time_point());
  param_state_.assign(params_.size(), ParamState());
  timeline_.bucket_start.assign(buckets_.size(), Clock::time_point());
  state_.assign(buckets_.size(), BucketState());
  for (const GradBucket& bucket : buckets_) {
    state_[bucket.index].pending = static_cast<int>(bucket.parameters.size());
    state_[bucket.index].running = state_[bucket.index].pending;
  }
  works_.assign(buckets_.size(), nullptr);
  compute_lanes_ = {args.lane, args.param_lane};
  reserve_gemms_ = comm_.size() > 1 && options_.overlap && options_.gemm_reserve > 0;
  next_to_launch_ = 0;
  next_after_reduce_ = 0;
}

// See Note [GEMM reserve] and Note [Gradients first]. For a layer with
// parameters of its own; a container's children are prepared one by one.
void Reducer::PrepareLayer(Layer& target, BackwardArgs& args) const {
  const auto found = owner_index_.find(&target);
  if (found == owner_index_.end()) return;
  const size_t layer = found->second;
  const Lane lane = args.lane;
  if (reserve_gemms_ && layer <= first_bucket_layer_) {
    args.lane = lane.WithGemmReserve(options_.gemm_reserve);
    if (layer < first_bucket_layer_) {
      args.param_lane = args.param_lane.WithGemmReserve(options_.gemm_reserve);
    }
  }
  if (gradients_first_[layer]) {
    args.param_lane = layer < first_bucket_layer_ ? args.lane : lane;
  }
}

void Reducer::OnParamsReady(Layer& layer) {
  MarkParameters(layer, &ParamState::ready, &BucketState::pending);
  if (options_.overlap) LaunchReadyBuckets();
}

void Reducer::OnLayerDone(Layer& layer) {
  const auto owner = owner_index_.find(&layer);
  if (owner != owner_index_.end()) {
    timeline_.layer_done[owner->second] = ReducerTimeline::Clock::now();
  }
  MarkParameters(layer, &ParamState::done, &BucketState::running);
  AfterReduceReadyBuckets(/*block=*/false);
}

// See Note [Bucket order]: launch only a prefix of ready buckets.
void Reducer::LaunchReadyBuckets() {
  while (next_to_launch_ < num_buckets() && state_[next_to_launch_].pending == 0) {
    const int b = next_to_launch_++;
    timeline_.bucket_start[b] = ReducerTimeline::Clock::now();
    ProfileRange range([&] {
      return "all-reduce bucket " + std::to_string(b) + " (" +
             std::to_string(buckets_[b].buffer.bytes()) + " bytes)";
    });
    works_[b] = comm_.size() == 1 ? std::make_shared<CompletedWork>()
                                  : hook_->Reduce(buckets_[b], compute_lanes_, timed_);
  }
}

// In bucket order, each once its layers have returned and (unless `block`)
// once its work can be waited on without the host.
void Reducer::AfterReduceReadyBuckets(bool block) {
  while (next_after_reduce_ < next_to_launch_ &&
         state_[next_after_reduce_].running == 0 &&
         (block || works_[next_after_reduce_]->ReadyForLanes())) {
    const int b = next_after_reduce_++;
    ProfileRange range([&] { return "after all-reduce bucket " + std::to_string(b); });
    hook_->AfterReduce(buckets_[b], *works_[b], compute_lanes_);
  }
}

void Reducer::FinishBuckets(const Lane& lane) {
  ProfileRange range("wait for reductions and updates");
  TANDEM_CHECK(next_to_launch_ == num_buckets())
      << "model '" << model_.Name() << "': " << num_buckets() - next_to_launch_
      << " gradient bucket(s) were never ready in this backward; every layer "
         "must report its parameter gradients (BackwardArgs::on_params_ready)";
  // Host transports block here until each reduction is done: the time
  // backward left communication running. On a GPU only the lane waits.
  for (const std::shared_ptr<Work>& work : works_) work->WaitOn(lane);
  const ReducerTimeline::Clock::time_point reduced = ReducerTimeline::Clock::now();
  AfterReduceReadyBuckets(/*block=*/true);
  hook_->FinishStep(lane);
  forwarded_ = false;
  timeline_.step_end = ReducerTimeline::Clock::now();
  timeline_.bucket_work = works_;
  last_comm_wait_ =
      lane.device().is_cpu()
          ? std::chrono::duration<double>(reduced - timeline_.backward_end).count()
          : 0.0;
}

}  // namespace tandem
