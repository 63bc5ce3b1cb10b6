#include "parallel/reducer.h"

#include <algorithm>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"

namespace tandem {

// Note [Bucket order]
// Buckets hold parameters in reverse layer order, the order in which backward
// finishes their gradients, so the first bucket is ready first. Buckets are
// launched strictly in index order (bucket k only after buckets 0..k-1), even
// if a later one happens to be ready first: every rank then issues the same
// collectives in the same order, which collectives require (a rank issuing
// bucket 2 while another issues bucket 1 would pair mismatched buffers or
// deadlock). PyTorch's reducer follows the same rule.
//
// Note [Queued all-reduce]
// On GPUs the backward loop runs ahead of the device: when a layer says its
// gradients are done (Layer::NotifyGradientsQueued), its kernels are queued,
// not finished. So the reducer does not hand a bucket to a host thread; it
// calls comm.QueueAllReduce, which records an event on the compute stream
// and one on its side lane (Linear queues its gradient kernels there), makes
// the communication stream wait on both and queues ncclAllReduce there.
// Linear says so between its weight-gradient GEMM and its input-gradient
// GEMM, so the all-reduce waits for the first only. For mlp-large on 2 H200s
// that changed little (4.21-4.22 ms a step either way): the two GEMMs, on
// two lanes, share the SMs and end together. It is still the dependency
// that is really there, and a layer whose input gradient outlasts its
// weight gradient no longer holds its bucket back.
// Backward continues queuing kernels for earlier layers, which the GPU runs
// while NCCL reduces. At the end, JoinQueued makes the compute stream wait on
// one event from the communication stream, so the optimizer's kernels (on the
// compute stream) see the reduced gradients. No host synchronisation, no
// cudaDeviceSynchronize: the host stays ahead of the GPU.
//
// Note [Gradient averaging]
// The loss is normalised by the global batch size (Loss::Forward's `examples`)
// rather than by each worker's shard, and the reducer SUMS gradients. The sum
// of per-shard gradients of sum(loss_i) / global_batch is exactly the gradient
// of the global-batch mean, even when the last batch splits unevenly (a
// per-rank mean followed by an average over ranks would weight a 3-example
// shard like a 4-example one).

// Note [Lanes]
// One all-reduce of a bucket does not reach the bandwidth of one all-reduce
// of the whole gradient: each NCCL call fills and drains its pipeline, and
// calls on one communicator's stream run one after another. On 2 H200s the
// 7 buckets of mlp-large (25 MiB target) took 0.94 ms one after another and
// 0.84 ms over two communicators, against 0.79 ms for one raw all-reduce of
// the same 235 MB (bench/nccl_lanes_bench, docs/benchmarks.md). So buckets
// go round-robin over the lanes given. Every rank issues bucket b on the
// same lane in the same order, which is all NCCL asks of concurrent
// communicators.

// Note [GEMM reserve]
// NCCL's all-reduce kernels hold SMs (one per channel) for as long as they
// run. A backward GEMM that cuBLAS planned for every SM then runs part of its
// work as a straggling extra wave on the SMs left. So while all-reduces may
// be in flight (from the first queued bucket to the end of backward) the
// reducer asks the backend to plan GEMMs for `gemm_reserve` fewer SMs
// (cublasSetSmCountTarget, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET). On 2 H200s
// 16 took 1.3-2.0% off the step of mlp-large at batch 512 in two calls; at
// 4096 it moved the step by -0.8% and +0.9%, within the spread between
// calls. Capping NCCL's CTAs instead slowed the all-reduces more than it
// sped the GEMMs (bench/run_nccl_sm_sweep.sh, docs/benchmarks.md).
//
// Note [Gradients first]
// Backward reaches the layers nearest the input last, so their buckets'
// all-reduces are the ones left running after it. Linear runs its
// weight-gradient GEMM on the side lane, beside the input-gradient GEMM;
// the two share the SMs and end together, so a bucket's all-reduce starts
// only when the layer's input gradient is done too. For the second layer of
// mlp-large (a 64 MiB gradient) that left most of its all-reduce, and all of
// the first layer's behind it, after backward. With the hint
// (Layer::SetGradientsFirst) the layer computes its weight gradient first,
// on the main lane, and its all-reduce runs beside its input-gradient GEMM
// and the first layer's backward. The price is the overlap of the layer's
// two GEMMs, so only the first ReducerOptions::gradients_first_layers layers
// with parameters take it (2: mlp's first layer computes no input gradient,
// so the second is the one that matters). On 2 H200s, mlp-large at batch
// 512: 4.17 -> 4.07 ms a step, and with NCCL's symmetric memory (Note
// [Symmetric memory] in nccl_communicator.cc) 4.10 -> 3.99 ms; in one call
// with everything else as it is now, 4.02 -> 3.93 ms. Giving the hint to
// the third layer as well was slower (4.00 ms). At batch 4096, where every
// all-reduce hides behind backward anyway, it costs 0.5% (27.56 -> 27.71
// ms). The gradients are the same GEMM's either way, so results do not
// change.
//
// Note [Per-bucket update]
// With set_optimizer, a bucket's parameters are updated right behind its
// all-reduce (Communicator::RunQueued), instead of by one pass after
// backward. The update is queued once every layer of the bucket has returned
// from Backward (its all-reduce may start earlier, see Note [Queued
// all-reduce]); RunQueued orders it after the compute stream and its side
// lane as they stand then, since the layers' input-gradient GEMMs read the
// weights, and after them nothing of this step does. On NCCL the updates
// have a stream of their own, so the next bucket's all-reduce does not wait
// for them (Note [Stream order] in nccl_communicator.cc). The compute
// stream's join (JoinQueued, after backward) comes after the updates, so the
// next forward sees them. The updates of all but the last bucket then run
// beside backward; only the last bucket's is left after it. The optimizer's
// kernels are the same ones Step would queue, on the same data, so the
// result is bitwise the same (tests/parallel/reducer_test, gpu_reducer_test).

Reducer::Reducer(Sequential& model, Communicator& comm, ReducerOptions options)
    : Reducer(model, std::vector<Communicator*>{&comm}, options) {}

namespace {
Communicator& FirstLane(const std::vector<Communicator*>& lanes) {
  TANDEM_CHECK(!lanes.empty() && lanes[0] != nullptr)
      << "Reducer needs at least one communicator";
  return *lanes[0];
}
}  // namespace

Reducer::Reducer(Sequential& model, std::vector<Communicator*> lanes,
                 ReducerOptions options)
    : model_(model), comm_(FirstLane(lanes)), options_(options) {
  TANDEM_CHECK(options.gemm_reserve >= 0)
      << "ReducerOptions::gemm_reserve is " << options.gemm_reserve
      << ": it counts multiprocessors left to NCCL, so 0 (none) or more";
  TANDEM_CHECK(options.gradients_first_layers >= 0)
      << "ReducerOptions::gradients_first_layers is " << options.gradients_first_layers
      << ": it counts layers, so 0 (none) or more";
  for (Communicator* lane : lanes) {
    TANDEM_CHECK(lane != nullptr && lane->rank() == comm_.rank() &&
                 lane->size() == comm_.size())
        << "Reducer lanes must span the same ranks: lane 0 is "
        << comm_.Describe() << ", another is "
        << (lane ? lane->Describe() : std::string("null"));
  }
  if (comm_.supports_queued()) {
    for (Communicator* lane : lanes) {
      if (lane->supports_queued()) lanes_.push_back(lane);
    }
  } else {
    lanes_ = {&comm_};
  }
  TANDEM_CHECK(options.bucket_bytes > 0)
      << "--bucket_mb must be positive, got " << options.bucket_bytes
      << " bytes";
  for (size_t layer = 0; layer < model_.size(); ++layer) {
    std::vector<size_t> indices;
    for (Parameter& p : model_.layer(layer).Parameters()) {
      indices.push_back(params_.size());
      params_.push_back(p);
    }
    layer_params_.push_back(std::move(indices));
  }
  BuildBuckets();
  const Device device = params_.empty() ? Device::Cpu() : params_[0].value->device();
  TANDEM_CHECK(device.is_cpu() || comm_.size() == 1 || comm_.supports_queued())
      << "data parallelism on " << device << " needs a GPU communicator (NCCL); "
      << comm_.Describe() << " reduces host memory only";
  BroadcastParameters();
  if (comm_.size() > 1 && options_.overlap) {
    // See Note [Gradients first].
    int hinted = 0;
    for (size_t layer = 0; layer < model_.size() && hinted < options_.gradients_first_layers;
         ++layer) {
      if (layer_params_[layer].empty()) continue;
      // Counted either way; taken back at the end only where we gave it.
      if (!model_.layer(layer).gradients_first()) {
        model_.layer(layer).SetGradientsFirst(true);
        gradients_first_.push_back(layer);
      }
      ++hinted;
    }
  }
  // See Note [Queued all-reduce]: stream-ordered communicators need no thread.
  if (!comm_.supports_queued()) comm_thread_ = std::thread([this] { CommLoop(); });
}

Reducer::~Reducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (comm_thread_.joinable()) comm_thread_.join();
  // The model may go on without data parallelism.
  for (size_t layer : gradients_first_) model_.layer(layer).SetGradientsFirst(false);
}

void Reducer::set_optimizer(Optimizer* optimizer) {
  if (optimizer_ != nullptr) optimizer_->set_updates_handed_off(false);
  optimizer_ = nullptr;
  bucket_optimizer_params_.clear();
  if (optimizer == nullptr) return;
  TANDEM_CHECK(optimizer->fused_into() == nullptr)
      << "optimizer '" << optimizer->Name() << "' is fused into model '"
      << optimizer->fused_into()->Name()
      << "' (Sgd::FuseIntoBackward): it cannot also update per bucket";
  const std::vector<Parameter>& theirs = optimizer->parameters();
  TANDEM_CHECK(theirs.size() == params_.size())
      << "optimizer '" << optimizer->Name() << "' holds " << theirs.size()
      << " parameters but model '" << model_.Name() << "' has " << params_.size()
      << ": build it over the model's Parameters()";
  std::vector<size_t> index_of(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    size_t j = 0;
    while (j < theirs.size() && theirs[j].value != params_[i].value) ++j;
    TANDEM_CHECK(j < theirs.size())
        << "optimizer '" << optimizer->Name() << "' does not hold parameter '"
        << params_[i].name << "' of model '" << model_.Name() << "'";
    index_of[i] = j;
  }
  for (const Bucket& bucket : buckets_) {
    std::vector<size_t> indices;
    for (size_t i : bucket.params) indices.push_back(index_of[i]);
    bucket_optimizer_params_.push_back(std::move(indices));
  }
  optimizer_ = optimizer;
  optimizer_->set_updates_handed_off(true);
}

void Reducer::UpdateBucket(int b) {
  if (optimizer_ == nullptr) return;
  // On NCCL: behind the bucket's all-reduce on its communication stream,
  // and behind the compute stream's reads of the weights.
  lanes_[b % lanes_.size()]->RunQueued(
      [&] { optimizer_->UpdateParameters(bucket_optimizer_params_[b]); });
}

void Reducer::BuildBuckets() {
  param_bucket_.assign(params_.size(), -1);
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  // A bucket closes once it holds bucket_bytes or more, the parameter that
  // crossed the line included (PyTorch DDP's rule). Closing before it would
  // give a layer's bias, which backward finishes just before its weight, an
  // all-reduce of its own: mlp-large had three 16 KiB buckets that way, each
  // costing a whole NCCL call's latency.
  bool open = false;
  for (size_t i = params_.size(); i-- > 0;) {
    if (!open) {
      groups.emplace_back();
      bytes = 0;
      open = true;
    }
    groups.back().push_back(i);
    bytes += params_[i].value->numel() * 4;
    if (bytes >= options_.bucket_bytes) open = false;
  }
  for (const std::vector<size_t>& group : groups) {
    Bucket bucket;
    int64_t elements = 0;
    for (size_t i : group) elements += params_[i].value->numel();
    const Device device = params_[group.front()].value->device();
    bucket.flat = lanes_[buckets_.size() % lanes_.size()]->NewReduceBuffer(elements, device);
    int64_t offset = 0;
    for (size_t i : group) {
      Parameter& p = params_[i];
      TANDEM_CHECK(p.value->device() == device)
          << "parameter '" << p.name << "' is on " << p.value->device()
          << " but '" << params_[group.front()].name << "' is on " << device
          << ": a replica's parameters must share one device";
      const int64_t n = p.value->numel();
      Tensor view = bucket.flat.Slice(offset, offset + n).Reshape(p.value->shape());
      view.CopyFrom(*p.grad);
      *p.grad = view;  // the layer now accumulates straight into the bucket
      param_bucket_[i] = static_cast<int>(buckets_.size());
      offset += n;
    }
    bucket.params = group;
    buckets_.push_back(std::move(bucket));
  }
  ready_.assign(buckets_.size(), false);
}

std::vector<std::string> Reducer::BucketParameterNames(int b) const {
  std::vector<std::string> names;
  for (size_t i : buckets_.at(b).params) names.push_back(params_[i].name);
  return names;
}

void Reducer::BroadcastParameters() {
  if (comm_.size() == 1) return;
  for (Parameter& p : params_) {
    comm_.Broadcast(p.value->data(), p.value->numel(), /*root=*/0);
  }
}

Tensor Reducer::Backward(const Tensor& dloss) {
  // One worker: its gradients already are the global ones.
  if (!sync_ || comm_.size() == 1) {
    last_comm_wait_ = 0.0;
    Tensor dx = model_.Backward(dloss, layer_hook_);
    if (sync_ && optimizer_ != nullptr) {
      // Nothing to reduce: update in the compute stream's order, after the
      // layers' side-lane work.
      ops::JoinSideLane(params_[0].value->device());
      for (const std::vector<size_t>& indices : bucket_optimizer_params_) {
        optimizer_->UpdateParameters(indices);
      }
    }
    return dx;
  }

  using Clock = ReducerTimeline::Clock;
  timeline_ = ReducerTimeline();
  timeline_.layer_done.assign(model_.size(), Clock::time_point());
  timeline_.bucket_start.assign(buckets_.size(), Clock::time_point());
  timeline_.bucket_end.assign(buckets_.size(), Clock::time_point());
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.running = b.pending;
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_launch_ = 0;
  next_to_update_ = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reduced_ = 0;
    comm_error_.clear();
  }

  TANDEM_CHECK(model_.grad_target().kind != GradTarget::kApplySgd)
      << "model '" << model_.Name()
      << "' applies SGD inside Backward (Sgd::FuseIntoBackward), so it keeps "
         "no gradients to all-reduce: with more than one worker, step the "
         "optimizer after the reducer instead";
  timeline_.backward_start = Clock::now();
  Tensor dx;
  try {
    dx = model_.Backward(
        dloss, Sequential::BackwardHooks{
                   [this](size_t layer) { OnGradientsQueued(layer); },
                   [this](size_t layer) { OnLayerDone(layer); }});
  } catch (...) {
    ReleaseGemmReserve();
    throw;
  }
  ReleaseGemmReserve();
  timeline_.backward_end = Clock::now();
  if (!options_.overlap) LaunchReadyBuckets();
  if (comm_.supports_queued()) {
    UpdateFinishedBuckets();  // those left: without overlap, all of them
    // Bucket b's span is the (b / lanes)-th of lane b % lanes.
    std::vector<std::vector<Communicator::QueuedSpan>> spans;
    for (Communicator* lane : lanes_) {
      lane->JoinQueued();
      spans.push_back(lane->TakeQueuedSpans());
    }
    timeline_.device_bucket_spans.clear();
    for (size_t b = 0;; ++b) {
      std::vector<Communicator::QueuedSpan>& lane = spans[b % spans.size()];
      const size_t k = b / spans.size();
      if (k >= lane.size()) break;
      timeline_.device_bucket_spans.push_back(std::move(lane[k]));
    }
    timeline_.step_end = Clock::now();
    last_comm_wait_ = 0.0;  // the host never waits; the GPU's wait is on-device
    return dx;
  }

  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] {
    return reduced_ == static_cast<int>(buckets_.size()) || !comm_error_.empty();
  });
  timeline_.step_end = Clock::now();
  last_comm_wait_ =
      std::chrono::duration<double>(timeline_.step_end - timeline_.backward_end).count();
  TANDEM_CHECK(comm_error_.empty()) << "gradient all-reduce failed: " << comm_error_;
  lock.unlock();
  for (int b = 0; b < num_buckets(); ++b) UpdateBucket(b);
  return dx;
}

void Reducer::OnGradientsQueued(size_t layer) {
  for (size_t i : layer_params_[layer]) {
    const int b = param_bucket_[i];
    if (--buckets_[b].pending == 0) ready_[b] = true;
  }
  if (options_.overlap) LaunchReadyBuckets();
}

void Reducer::OnLayerDone(size_t layer) {
  timeline_.layer_done[layer] = ReducerTimeline::Clock::now();
  if (layer_hook_) layer_hook_(layer);
  for (size_t i : layer_params_[layer]) --buckets_[param_bucket_[i]].running;
  if (comm_.supports_queued()) UpdateFinishedBuckets();
}

void Reducer::UpdateFinishedBuckets() {
  // In bucket order, each behind its own all-reduce.
  while (next_to_update_ < next_to_launch_ &&
         buckets_[next_to_update_].running == 0) {
    UpdateBucket(next_to_update_++);
  }
}

void Reducer::LaunchReadyBuckets() {
  // See Note [Bucket order]: launch only a prefix of ready buckets.
  std::vector<int> launch;
  while (next_to_launch_ < num_buckets() && ready_[next_to_launch_]) {
    launch.push_back(next_to_launch_++);
  }
  if (launch.empty()) return;
  if (comm_.supports_queued()) {
    // See Note [GEMM reserve]; only while backward still runs.
    if (options_.gemm_reserve > 0 && options_.overlap && !gemm_reserved_) {
      GetBackend(params_[0].value->device()).SetGemmReserve(options_.gemm_reserve);
      gemm_reserved_ = true;
    }
    // See Note [Queued all-reduce]; the sum follows Note [Gradient averaging].
    for (int b : launch) {
      timeline_.bucket_start[b] = ReducerTimeline::Clock::now();
      lanes_[b % lanes_.size()]->QueueAllReduce(
          buckets_[b].flat.data(), buckets_[b].flat.numel(), ReduceOp::kSum);
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.insert(queue_.end(), launch.begin(), launch.end());
  }
  cv_.notify_all();
}

void Reducer::ReleaseGemmReserve() {
  if (!gemm_reserved_) return;
  gemm_reserved_ = false;
  GetBackend(params_[0].value->device()).SetGemmReserve(0);
}

void Reducer::CommLoop() {
  for (;;) {
    int bucket;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left to do
      bucket = queue_.front();
      queue_.pop_front();
    }
    Reduce(bucket);
  }
}

void Reducer::Reduce(int b) {
  const auto start = ReducerTimeline::Clock::now();
  std::string error;
  try {
    // See Note [Gradient averaging]: a sum, not an average.
    comm_.AllReduce(buckets_[b].flat.data(), buckets_[b].flat.numel(), ReduceOp::kSum);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const auto end = ReducerTimeline::Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    timeline_.bucket_start[b] = start;
    timeline_.bucket_end[b] = end;
    if (error.empty()) {
      ++reduced_;
    } else if (comm_error_.empty()) {
      comm_error_ = "bucket " + std::to_string(b) + ": " + error;
      queue_.clear();
    }
  }
  cv_.notify_all();
}

}  // namespace tandem
