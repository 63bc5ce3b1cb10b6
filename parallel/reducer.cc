#include "parallel/reducer.h"

#include <algorithm>

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
// On GPUs the backward loop runs ahead of the device: when OnLayerDone fires,
// the layer's kernels are queued, not finished. So the reducer does not hand
// a bucket to a host thread; it calls comm.QueueAllReduce, which records an
// event on the compute stream and one on its side lane (Linear queues its
// gradient kernels there), makes the communication stream wait on both and
// queues ncclAllReduce there.
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
    bucket.flat = Tensor::Zeros({elements}, device);
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
    return model_.Backward(dloss, layer_hook_);
  }

  using Clock = ReducerTimeline::Clock;
  timeline_ = ReducerTimeline();
  timeline_.layer_done.assign(model_.size(), Clock::time_point());
  timeline_.bucket_start.assign(buckets_.size(), Clock::time_point());
  timeline_.bucket_end.assign(buckets_.size(), Clock::time_point());
  for (Bucket& b : buckets_) b.pending = static_cast<int>(b.params.size());
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_launch_ = 0;
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
  Tensor dx = model_.Backward(dloss, [this](size_t layer) { OnLayerDone(layer); });
  timeline_.backward_end = Clock::now();
  if (!options_.overlap) LaunchReadyBuckets();
  if (comm_.supports_queued()) {
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
  return dx;
}

void Reducer::OnLayerDone(size_t layer) {
  timeline_.layer_done[layer] = ReducerTimeline::Clock::now();
  if (layer_hook_) layer_hook_(layer);
  for (size_t i : layer_params_[layer]) {
    const int b = param_bucket_[i];
    if (--buckets_[b].pending == 0) ready_[b] = true;
  }
  if (options_.overlap) LaunchReadyBuckets();
}

void Reducer::LaunchReadyBuckets() {
  // See Note [Bucket order]: launch only a prefix of ready buckets.
  std::vector<int> launch;
  while (next_to_launch_ < num_buckets() && ready_[next_to_launch_]) {
    launch.push_back(next_to_launch_++);
  }
  if (launch.empty()) return;
  if (comm_.supports_queued()) {
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
