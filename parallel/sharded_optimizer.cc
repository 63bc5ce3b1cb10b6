#include "parallel/sharded_optimizer.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/profile_range.h"

namespace tandem {

// Note [Sharded step]
// ~~~~~~~~~~~~~~~~~~~
// Rank r of N owns block r of every bucket: elements [r * chunk, (r + 1) *
// chunk), chunk = elements / N (the reducer pads each bucket to a multiple of
// N with zeros, which stay zero: no layer writes them, and the sum of zeros
// is zero). The gradients and the parameters' values share that layout, one
// flat buffer each per bucket, so a shard is a slice of each and the update
// is the optimizer's element-wise kernel on two slices.
//   1. Reduce (during backward, when the bucket's gradients are queued):
//      reduce-scatter of the gradient buffer in place; block r receives the
//      sum over the ranks of their block r. Same bytes on the wire as half an
//      all-reduce; the same lanes and overlap as the all-reduce.
//   2. AfterReduce (bucket order, once the reduce-scatter can be waited on
//      and the bucket's layers have returned from Backward): on the update
//      lane, after the reduce-scatter and backward's lanes as they stand (the
//      layers' input-gradient GEMMs read the weights), the optimizer updates
//      shard r of the bucket. With clipping, nothing: the factor needs every
//      shard's gradient.
//   3. FinishStep (backward over; the caller's lane has waited for every
//      reduce-scatter): with clipping or a tracked norm, the squares of the
//      shards are summed on the caller's lane and all-reduced, and with
//      clipping every shard scaled and updated on the update lane. Then each
//      bucket's parameters are all-gathered in place after the update lane,
//      in forward order (the last bucket first: it holds the layers nearest
//      the input). A bucket whose every parameter keeps a working copy (the
//      model computes in bfloat16) gathers the working copies: rank r casts
//      its block of masters into its block of the bucket's working buffer,
//      which is gathered, half the bytes of the masters, and no rank casts
//      the others' blocks. Its masters outside block r are then stale on
//      rank r until GatherMasters gathers them (checkpoints, exports). Any
//      other bucket gathers its masters, and its working copies are cast
//      from them once gathered. The step is counted.
//   4. WaitForParameters (per bucket): the caller's lane waits for the
//      bucket's gather (and casts). FinishStep calls it for every bucket,
//      unless gather_during_forward: then the reducer calls it as the next
//      forward reaches each layer (Reducer::Forward), so the gathers of the
//      later layers run beside the forward of the first ones, and for every
//      bucket before backward.
// Why the gathers wait for the end of backward: collectives on one
// communicator must be issued in the same order on every rank. Reduce is
// called at fixed points of backward (a layer's gradients queued), the same
// on every rank; AfterReduce is not (it runs once a reduce-scatter happens to
// be done). A gather issued from AfterReduce could fall between two
// reduce-scatters on one rank and after both on another. FinishStep is a
// fixed point, after every reduce-scatter.
// Across steps: the next step's reduce-scatters write gradients the updates
// read, and its forward and backward read the parameters the gathers write;
// both come after the caller's lane, which waited for the gathers (step 4),
// which followed the updates.

namespace {

// Each parameter's view of `buffer`, a flat buffer of a bucket laid out as
// its gradients are: parameter i's elements follow parameter i - 1's.
std::vector<Tensor> ParameterViews(const Tensor& buffer,
                                   const std::vector<NamedParameter>& parameters) {
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const NamedParameter& p : parameters) {
    const int64_t n = p.value().numel();
    views.push_back(buffer.Slice(offset, offset + n).Reshape(p.value().shape()));
    offset += n;
  }
  return views;
}

}  // namespace

ShardedOptimizerHook::ShardedOptimizerHook(Optimizer& optimizer, ShardedOptimizerOptions options,
                                           std::unique_ptr<CommHook> reduce)
    : optimizer_(optimizer), options_(options), reduce_(std::move(reduce)) {
  TANDEM_CHECK(options.max_grad_norm >= 0.f)
      << "ShardedOptimizerOptions::max_grad_norm is " << options.max_grad_norm
      << " (--clip_grad_norm): 0 turns clipping off, a positive norm clips";
}

ShardedOptimizerHook::~ShardedOptimizerHook() {
  for (Bucket& b : buckets_) {
    if (!b.gather) continue;
    try {
      b.gather->Wait();
    } catch (const std::exception&) {
      // An aborted group: the gather writes nothing more.
    }
  }
}

void ShardedOptimizerHook::Bind(const std::vector<GradBucket>& buckets) {
  TANDEM_CHECK(buckets_.empty())
      << "ShardedOptimizerHook is bound already: register one hook per reducer "
         "and optimizer";
  // Every parameter of the model in exactly one bucket, and the optimizer
  // holds exactly those.
  const std::vector<NamedParameter>& theirs = optimizer_.parameters();
  size_t held = 0;
  for (const GradBucket& bucket : buckets) {
    for (const NamedParameter& p : bucket.parameters) {
      size_t j = 0;
      while (j < theirs.size() && theirs[j].parameter != p.parameter) ++j;
      TANDEM_CHECK(j < theirs.size())
          << "optimizer '" << optimizer_.Name() << "' does not hold parameter '" << p.name
          << "': build it over the model's Parameters()";
      ++held;
    }
  }
  TANDEM_CHECK(held == theirs.size())
      << "optimizer '" << optimizer_.Name() << "' holds " << theirs.size()
      << " parameters but the model has " << held << ": build it over the model's Parameters()";
  if (reduce_) reduce_->Bind(buckets);
  if (buckets.empty()) return;

  Communicator& first = *buckets[0].comm;
  rank_ = first.rank();
  size_ = first.size();
  const Device device = buckets[0].buffer.device();
  std::vector<ParameterShard> shards;
  for (const GradBucket& bucket : buckets) {
    const int64_t elements = bucket.buffer.numel();
    TANDEM_CHECK(bucket.buffer.dtype() == DType::kFloat32 && bucket.buffer.device() == device)
        << "ShardedOptimizerHook: bucket " << bucket.index << " holds "
        << DTypeName(bucket.buffer.dtype()) << " gradients on " << bucket.buffer.device()
        << "; it shards float32 gradients of one device";
    TANDEM_CHECK(elements % size_ == 0)
        << "ShardedOptimizerHook: bucket " << bucket.index << " holds " << elements
        << " elements, not a multiple of the " << size_
        << " workers: build the Reducer with ReducerOptions::shard_optimizer "
           "(--shard_optimizer), which pads its buckets";
    Bucket b;
    b.grads = bucket.buffer;
    b.chunk = elements / size_;
    b.comm = bucket.comm;
    b.parameters = bucket.parameters;
    // Every rank asks for the same buffers in the same order (NCCL
    // registers them together). One rank gathers nothing.
    b.values = size_ == 1 ? Tensor::Zeros({elements}, device)
                          : bucket.comm->NewReduceBuffer(elements, device);
    const int64_t begin = b.chunk * rank_, end = begin + b.chunk;
    shards.push_back({"bucket" + std::to_string(bucket.index) + ".shard" + std::to_string(rank_) +
                          "of" + std::to_string(size_),
                      b.values.Slice(begin, end), b.grads.Slice(begin, end)});
    buckets_.push_back(std::move(b));
  }
  // Refuses an optimizer that has stepped before anything is changed.
  optimizer_.ShardState(std::move(shards));
  for (Bucket& b : buckets_) {
    // The layers' parameters now live in the flat buffer.
    const std::vector<Tensor> views = ParameterViews(b.values, b.parameters);
    for (size_t i = 0; i < views.size(); ++i) {
      b.parameters[i].parameter->MoveValueInto(views[i], b.parameters[i].name);
    }
    GatherWorkingCopiesOf(b, device);
  }
  Backend& backend = GetBackend(device);
  lane_ = backend.NewLane({"optimizer", /*high_priority=*/true});
  // The values were copied and the state zeroed on the main lane.
  ops::WaitFor(lane_.get(), backend.main_lane());
  if (norm_wanted()) {
    const size_t terms = reduce_ ? optimizer_.parameters().size() : buckets_.size();
    squares_ = Tensor::Zeros({1, static_cast<int64_t>(terms)}, device);
    norm_ = Tensor::Zeros({1}, device);
    pair_ = Tensor::Zeros({1, 2}, device);
    factor_ = Tensor::Zeros({1}, device);
  }
}

// See Note [Sharded step], 3: where every parameter of a bucket keeps a
// working copy of one dtype, the copies become views of one flat buffer laid
// out as the values, which the step gathers instead of the values.
void ShardedOptimizerHook::GatherWorkingCopiesOf(Bucket& b, Device device) {
  if (size_ == 1 || b.parameters.empty()) return;
  const Tensor* first = b.parameters[0].working();
  if (first == nullptr || !first->defined()) return;
  const DType dtype = first->dtype();
  for (const NamedParameter& p : b.parameters) {
    const Tensor* working = p.working();
    if (working == nullptr || !working->defined() || working->dtype() != dtype) return;
  }
  b.working = b.comm->NewReduceBuffer(b.values.numel(), device, dtype);
  const std::vector<Tensor> views = ParameterViews(b.working, b.parameters);
  for (size_t i = 0; i < views.size(); ++i) {
    b.parameters[i].parameter->MoveWorkingInto(views[i], b.parameters[i].name);
  }
}

// See Note [Sharded step], 1.
std::shared_ptr<Work> ShardedOptimizerHook::Reduce(const GradBucket& bucket,
                                                   const std::vector<Lane>& ready, bool timed) {
  if (reduce_) return reduce_->Reduce(bucket, ready, timed);
  const Bucket& b = buckets_.at(bucket.index);
  CollectiveOptions options;
  options.after = ready;
  options.timed = timed;
  options.label = "gradient bucket " + std::to_string(bucket.index);
  // See Note [Gradient averaging] in reducer.cc: a sum, not an average.
  float* grads = b.grads.data();
  return b.comm->ReduceScatter(grads, b.chunk, grads + b.chunk * rank_, ReduceOp::kSum,
                               std::move(options));
}

// See Note [Sharded step], 2.
void ShardedOptimizerHook::AfterReduce(const GradBucket& bucket, Work& work,
                                       const std::vector<Lane>& compute) {
  compute_ = compute;
  if (reduce_) reduce_->AfterReduce(bucket, work, compute);
  if (options_.max_grad_norm > 0.f) return;  // the update needs the global norm
  const Lane lane = lane_.get();
  if (reduce_) {
    reduce_->WaitForGradients(bucket, work, lane);
  } else {
    work.WaitOn(lane);
  }
  for (const Lane& c : compute) ops::WaitFor(lane, c);
  optimizer_.UpdateShards({static_cast<size_t>(bucket.index)}, lane);
}

// The global norm: each shard's sum of squares, summed here and over the
// ranks (one all-reduce of [1]), on `lane`, which has waited for every
// reduce-scatter.
void ShardedOptimizerHook::ComputeNorm(const Lane& lane) {
  const std::vector<ParameterShard>& shards = optimizer_.shards();
  const int64_t n = static_cast<int64_t>(shards.size());
  Tensor squares = squares_.Reshape({n});
  for (int64_t i = 0; i < n; ++i) {
    Tensor slot = squares.Slice(i, i + 1);
    ops::SumOfSquares(lane, shards[i].grad, slot);
  }
  ops::RowSum(lane, squares_, norm_);
  if (size_ > 1) {
    CollectiveOptions options;
    options.after = {lane};
    options.label = "gradient norm";
    buckets_[0].comm->AllReduce(norm_, ReduceOp::kSum, std::move(options))->WaitOn(lane);
  }
  ops::Sqrt(lane, norm_, norm_);
}

// With a `reduce` hook every rank holds the whole gradient: the norm over
// it, parameter by parameter in the optimizer's (the model's) order, as the
// unsharded clipper (trainer/grad_clip.h) sums it, and no all-reduce.
void ShardedOptimizerHook::ComputeWholeNorm(const Lane& lane) {
  const std::vector<NamedParameter>& params = optimizer_.parameters();
  Tensor squares = squares_.Reshape({static_cast<int64_t>(params.size())});
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor slot = squares.Slice(i, i + 1);
    ops::SumOfSquares(lane, params[i].grad(), slot);
  }
  ops::RowSum(lane, squares_, norm_);
  ops::Sqrt(lane, norm_, norm_);
}

// factor = max_norm / max(norm + eps, max_norm), as the unsharded clipper:
// 1 while the norm is at most max_norm.
void ShardedOptimizerHook::ClipShards(const Lane& lane) {
  Tensor first = pair_.Reshape({2}).Slice(0, 1), second = pair_.Reshape({2}).Slice(1, 2);
  ops::AddScalar(lane, norm_, 1e-6f, first);
  ops::Fill(lane, second, options_.max_grad_norm);
  ops::RowMax(lane, pair_, factor_);
  ops::Reciprocal(lane, factor_, factor_);
  ops::MulScalar(lane, factor_, options_.max_grad_norm, factor_);
  for (const ParameterShard& s : optimizer_.shards()) {
    Tensor row = s.grad.Reshape({1, s.grad.numel()});
    ops::BroadcastMul(lane, row, factor_, Broadcast::kColumn, row);
  }
}

// See Note [Sharded step], 3.
void ShardedOptimizerHook::FinishStep(const Lane& lane) {
  if (buckets_.empty()) {
    optimizer_.FinishStep();
    return;
  }
  const Lane update = lane_.get();
  if (reduce_) reduce_->FinishStep(lane);  // `lane` sees the sums
  if (norm_wanted()) {
    ProfileRange range("gradient norm over shards");
    if (reduce_) {
      ComputeWholeNorm(lane);
    } else {
      ComputeNorm(lane);
    }
    if (options_.max_grad_norm > 0.f) {
      ClipShards(lane);
      // Backward's lanes read the weights; the updates come after them and
      // after the clipped gradients.
      for (const Lane& c : compute_) ops::WaitFor(update, c);
      ops::WaitFor(update, lane);
      std::vector<size_t> all(buckets_.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      optimizer_.UpdateShards(all, update);
    }
  }
  StartGathers(update);
  if (!options_.gather_during_forward) WaitForEveryBucket(lane);
  optimizer_.FinishStep();
}

// Each bucket's parameters gathered from the ranks' shards, after the
// updates on `update`: a bucket with working copies gathers them (this
// rank's block cast from its masters first), another its masters. In
// forward order (the last bucket holds the layers nearest the input), so
// the gathers a forward needs first finish first.
void ShardedOptimizerHook::StartGathers(const Lane& update) {
  ProfileRange range("all-gather parameters");
  for (size_t k = buckets_.size(); k-- > 0;) {
    Bucket& b = buckets_[k];
    b.pending = true;
    if (size_ == 1) continue;
    const int64_t begin = b.chunk * rank_, end = begin + b.chunk;
    CollectiveOptions options;
    options.after = {update};
    options.label = "parameter bucket " + std::to_string(k);
    if (b.working.defined()) {
      Tensor mine = b.working.Slice(begin, end);
      ops::Cast(update, b.values.Slice(begin, end), mine);
      b.gather = GatherBlocks(b, b.working, std::move(options));
      masters_partial_ = true;
    } else {
      b.gather = GatherBlocks(b, b.values, std::move(options));
    }
  }
}

// Every rank's block of `buffer` (one of b's flat buffers, any dtype) into
// every rank's copy of it, in place.
std::shared_ptr<Work> ShardedOptimizerHook::GatherBlocks(const Bucket& b, const Tensor& buffer,
                                                         CollectiveOptions options) const {
  return b.comm->AllGather(buffer.Slice(b.chunk * rank_, b.chunk * (rank_ + 1)), buffer,
                           std::move(options));
}

void ShardedOptimizerHook::WaitForParameters(int bucket, const Lane& lane) {
  Bucket& b = buckets_.at(bucket);
  if (!b.pending) return;
  if (b.gather) b.gather->WaitOn(lane);
  b.gather.reset();
  ops::WaitFor(lane, lane_.get());
  if (!b.working.defined()) {  // gathered masters: their working copies are cast here
    for (NamedParameter& p : b.parameters) {
      Tensor* working = p.working();
      if (working != nullptr && working->defined()) ops::Cast(lane, p.value(), *working);
    }
  }
  b.pending = false;
}

bool ShardedOptimizerHook::ParametersPending() const {
  for (const Bucket& b : buckets_) {
    if (b.pending) return true;
  }
  return false;
}

void ShardedOptimizerHook::WaitForEveryBucket(const Lane& lane) {
  for (int k = static_cast<int>(buckets_.size()); k-- > 0;) WaitForParameters(k, lane);
}

void ShardedOptimizerHook::GatherMasters() {
  if (buckets_.empty()) return;
  const Lane main = MainLane(buckets_[0].values.device());
  WaitForEveryBucket(main);
  if (!masters_partial_) return;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    if (!b.working.defined()) continue;
    CollectiveOptions options;
    options.after = {main};
    options.label = "master parameters of bucket " + std::to_string(k);
    GatherBlocks(b, b.values, std::move(options))->WaitOn(main);
  }
  masters_partial_ = false;
}

std::vector<std::pair<std::string, Tensor*>> ShardedOptimizerHook::StateOfShard(size_t i) {
  const std::string prefix = optimizer_.shards().at(i).name;
  std::vector<std::pair<std::string, Tensor*>> mine;
  for (auto& [name, tensor] : optimizer_.State()) {
    if (name.compare(0, prefix.size(), prefix) == 0 && name.size() > prefix.size() &&
        name[prefix.size()] == '.') {
      mine.push_back({name.substr(prefix.size()), tensor});
    }
  }
  return mine;
}

// Each state tensor of a bucket's shard goes into its block of a buffer of
// the bucket's size, the buffer is all-gathered in place, and each
// parameter's state is its slice, laid out as its value.
std::vector<std::pair<std::string, Tensor>> ShardedOptimizerHook::GatherState() {
  std::vector<std::pair<std::string, Tensor>> state;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const Device device = b.values.device();
    const Lane main = MainLane(device);
    for (auto& [suffix, shard] : StateOfShard(i)) {
      Tensor whole = Tensor::Zeros({b.values.numel()}, device);
      Tensor mine = whole.Slice(b.chunk * rank_, b.chunk * (rank_ + 1));
      mine.CopyFrom(*shard);
      if (size_ > 1) {
        CollectiveOptions options;
        options.after = {main};
        options.label = "optimizer state of bucket " + std::to_string(i);
        GatherBlocks(b, whole, std::move(options))->WaitOn(main);
      }
      const std::vector<Tensor> views = ParameterViews(whole, b.parameters);
      for (size_t j = 0; j < views.size(); ++j) {
        state.push_back({b.parameters[j].name + suffix, views[j]});
      }
    }
  }
  return state;
}

void ShardedOptimizerHook::LoadState(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : state) by_name[name] = &tensor;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const int64_t begin = b.chunk * rank_, end = begin + b.chunk;
    for (auto& [suffix, shard] : StateOfShard(i)) {
      // The bucket's elements of this kind of state, on the host; the
      // padding stays zero.
      std::vector<float> whole(b.values.numel(), 0.f);
      int64_t offset = 0;
      for (const NamedParameter& p : b.parameters) {
        const int64_t n = p.value().numel();
        const auto found = by_name.find(p.name + suffix);
        TANDEM_CHECK(found != by_name.end())
            << "optimizer '" << optimizer_.Name() << "': the state to load has no '"
            << p.name + suffix << "'; give every tensor GatherState gives";
        TANDEM_CHECK(found->second->shape() == p.value().shape())
            << "optimizer '" << optimizer_.Name() << "': state '" << p.name + suffix << "' is "
            << ShapeToString(found->second->shape()) << " but parameter '" << p.name << "' is "
            << ShapeToString(p.value().shape());
        const std::vector<float> values = found->second->ToVector();
        std::copy(values.begin(), values.end(), whole.begin() + offset);
        offset += n;
      }
      shard->CopyFrom(Tensor::FromVector(
          std::vector<float>(whole.begin() + begin, whole.begin() + end), {b.chunk}));
    }
  }
}

}  // namespace tandem
