#include "parallel/pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <sstream>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "layers/dropout.h"
#include "parallel/communicator.h"
#include "parallel/sharding.h"
#include "parallel/thread_communicator.h"

#ifdef TANDEM_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/event.h"
#include "parallel/nccl_communicator.h"
#endif

namespace tandem {

// Note [Stage models]
// ~~~~~~~~~~~~~~~~~~~
// Sequential owns its layers and has no way to give them up, and layers/
// stays as it is. So the pipeline keeps each replica's Sequential whole (it
// owns the layers) and gives every stage a Sequential of StageLayer proxies
// for its range of layers. A proxy forwards Forward, Backward, Parameters and
// the training mode to the real layer, so the stage model is an ordinary
// Sequential: the Reducer drives its backward and re-homes its gradients into
// buckets through the same Parameter pointers, and the optimizer updates the
// real layers' tensors. Layer i lives on its stage's device (MoveTo).
//
// Note [Recompute]
// ~~~~~~~~~~~~~~~~
// Our layers cache what Backward needs from their LAST Forward only. GPipe
// runs forwards of micro-batches 0..M-1 before the backward of M-1..0, so by
// the time micro-batch m < M-1 is differentiated its caches are gone. Like
// GPipe's re-materialisation, each stage keeps only its input of every
// micro-batch (the activation that crossed the stage boundary) and runs the
// stage's forward on it again right before that micro-batch's backward. The
// backward of M-1 comes right after its forward, so it needs no recompute:
// a stage computes M + (M - 1) forwards and M backwards per step. Memory per
// stage is M boundary activations plus one micro-batch's internal ones.
// Recomputing must reproduce the first forward bit for bit; every op is
// deterministic, and the one layer with per-call state, Dropout, draws its
// mask from a counter (offset) that we save before each micro-batch's forward
// and restore before its recompute (and restore to the post-forward value
// afterwards, so the next step draws what single-device training would).
//
// Note [Cross-device hand-off]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A micro-batch's activation (or gradient) made by stage s on GPU a goes to
// stage s+1 (s-1) on GPU b without the host waiting for either GPU:
//   1. s records `ready` on a's compute stream after the kernels that wrote
//      the tensor, and passes (tensor, event) through the channel: the host
//      thread of the receiver gets a handle, not data;
//   2. the receiver allocates the destination on b, makes b's compute stream
//      wait for `ready` (cudaStreamWaitEvent across devices, which orders
//      correctly within one process with a plain cudaEventDisableTiming
//      event), queues cudaMemcpyPeerAsync on b's stream and records
//      `consumed` there.
// Lifetime: the source block belongs to a's caching allocator, which hands a
// freed block out again at once, relying on a's one stream for order (Note
// [Stream-ordered reuse] in core/cuda/caching_allocator.h). b's stream reads
// the block, so freeing it when the receiver drops the handle would let a
// overwrite it while the copy may still be running. The producer therefore
// keeps the source in its PeerCopy slot for the whole step; after the step,
// when every receiver has queued its copy, a's stream waits for each
// `consumed` event and only then is the source released (ReleaseHandoffs):
// any later reuse of the block on a is ordered after the copy. Costs: the
// stage outputs of one step stay allocated until its end (as large as the
// receiver's saved inputs), and two events per micro-batch and boundary,
// created once and re-recorded every step. Peer access is enabled once for
// each pair of neighbouring GPUs, so the copies go over NVLink directly.

namespace {

// Thrown by a hand-off after the pipeline was aborted: a consequence of
// another stage's failure, not a cause (like CollectiveAbortedError).
class StageAbortedError : public Error {
 public:
  using Error::Error;
};

// A stage's view of one layer of the model; see Note [Stage models].
class StageLayer final : public Layer {
 public:
  explicit StageLayer(Layer& target) : target_(target) {}
  Tensor Forward(const Tensor& x) override { return target_.Forward(x); }
  Tensor Backward(const Tensor& dy) override { return target_.Backward(dy); }
  void SetNeedsInputGrad(bool needed) override {
    Layer::SetNeedsInputGrad(needed);
    target_.SetNeedsInputGrad(needed);
  }
  std::vector<Parameter> Parameters() override { return target_.Parameters(); }
  std::string Name() const override { return target_.Name(); }
  std::string Describe() const override { return target_.Describe(); }

 protected:
  void OnModeChange() override { target_.SetTraining(training()); }

 private:
  Layer& target_;
};

bool IsPeerPair(Device from, Device to) {
  return from.is_cuda() && to.is_cuda() && from.index != to.index;
}

// One cross-GPU hand-off slot of a producing stage (one per micro-batch and
// direction). See Note [Cross-device hand-off].
struct PeerCopy {
  Tensor src;  // the producer's tensor, kept until ReleaseHandoffs
  int src_device = -1;
  int dst_device = -1;
  // Set by the receiver once it has queued the copy and recorded `consumed`.
  std::atomic<bool> copied{false};
#ifdef TANDEM_WITH_CUDA
  cuda::Event ready;     // on src_device, after the kernels that wrote src
  cuda::Event consumed;  // on dst_device, after the copy out of src
#endif
};

std::unique_ptr<PeerCopy> MakePeerCopy(Device from, Device to) {
#ifdef TANDEM_WITH_CUDA
  auto copy = std::make_unique<PeerCopy>();
  copy->src_device = from.index;
  copy->dst_device = to.index;
  // CUDA records an event only on a stream of the event's own device.
  {
    cuda::DeviceGuard guard(from.index);
    copy->ready = cuda::Event();
  }
  {
    cuda::DeviceGuard guard(to.index);
    copy->consumed = cuda::Event();
  }
  return copy;
#else
  TANDEM_CHECK(false) << "pipeline: a hand-off from " << from << " to " << to
                      << " needs CUDA, and this build has none";
  return nullptr;
#endif
}

void EnablePeerAccess(int from, int to) {
#ifdef TANDEM_WITH_CUDA
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) return;  // cudaMemcpyPeerAsync still works, through the host
  cuda::DeviceGuard guard(from);
  const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // not an error: clear it for the next launch check
    return;
  }
  CUDA_CHECK(status) << "enabling peer access from cuda:" << from << " to cuda:" << to;
#endif
}

// Per-stage busy time of one step: a steady clock on the CPU, timing events
// on the stage's compute stream on a GPU (so the time is the GPU's, not the
// host's, which only queues the work).
class StageTimer {
 public:
  void Init(Device device, int slots, bool enabled) {
    device_ = device;
    enabled_ = enabled;
    cpu_seconds_ = 0;
    if (!enabled_) return;
    cpu_start_.assign(slots, Clock::time_point());
#ifdef TANDEM_WITH_CUDA
    if (device.is_cuda()) {
      cuda::DeviceGuard guard(device.index);
      for (int i = 0; i < slots; ++i) {
        starts_.push_back(cuda::Event::Timing());
        stops_.push_back(cuda::Event::Timing());
      }
    }
#endif
  }
  void NewStep() {
    cpu_seconds_ = 0;
    used_.assign(cpu_start_.size(), false);
  }
  void Begin(int slot) {
    if (!enabled_) return;
    used_[slot] = true;
#ifdef TANDEM_WITH_CUDA
    if (device_.is_cuda()) {
      starts_[slot].Record(cuda::ComputeStream(device_.index));
      return;
    }
#endif
    cpu_start_[slot] = Clock::now();
  }
  void End(int slot) {
    if (!enabled_) return;
#ifdef TANDEM_WITH_CUDA
    if (device_.is_cuda()) {
      stops_[slot].Record(cuda::ComputeStream(device_.index));
      return;
    }
#endif
    cpu_seconds_ += std::chrono::duration<double>(Clock::now() - cpu_start_[slot]).count();
  }
  // Waits for the GPU's events.
  double BusySeconds() const {
#ifdef TANDEM_WITH_CUDA
    if (device_.is_cuda()) {
      double seconds = 0;
      for (size_t i = 0; i < used_.size(); ++i) {
        if (used_[i]) seconds += stops_[i].ElapsedMsSince(starts_[i]) / 1000.0;
      }
      return seconds;
    }
#endif
    return cpu_seconds_;
  }
  bool enabled() const { return enabled_; }

 private:
  using Clock = std::chrono::steady_clock;
  Device device_;
  bool enabled_ = false;
  std::vector<Clock::time_point> cpu_start_;
  std::vector<bool> used_;
  double cpu_seconds_ = 0;
#ifdef TANDEM_WITH_CUDA
  std::vector<cuda::Event> starts_, stops_;
#endif
};

// What crosses a stage boundary: a micro-batch's activation or gradient,
// either as a handle (CPU, or both stages on one device) or as a PeerCopy
// slot whose copy the receiver queues.
struct Handoff {
  int micro = -1;
  Tensor tensor;
  PeerCopy* peer = nullptr;
};

}  // namespace

// A bounded queue between two stage threads (mutex + condition variable).
// Abort wakes both sides; every later Push or Pop throws StageAbortedError.
class Pipeline::Channel {
 public:
  Channel(std::string name, size_t capacity)
      : name_(std::move(name)), capacity_(capacity) {}

  void Push(Handoff item) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return aborted_ || items_.size() < capacity_; });
    ThrowIfAborted();
    items_.push_back(std::move(item));
    cv_.notify_all();
  }
  Handoff Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return aborted_ || !items_.empty(); });
    ThrowIfAborted();
    Handoff item = std::move(items_.front());
    items_.pop_front();
    cv_.notify_all();
    return item;
  }
  void Abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) reason_ = reason;
    aborted_ = true;
    items_.clear();
    cv_.notify_all();
  }

 private:
  void ThrowIfAborted() const {
    if (aborted_) throw StageAbortedError(name_ + " aborted: " + reason_);
  }

  const std::string name_;
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Handoff> items_;
  bool aborted_ = false;
  std::string reason_;
};

// The communicators of each stage's replica group (replicas > 1).
struct Pipeline::Groups {
  std::vector<std::unique_ptr<ThreadGroup>> threads;  // per stage; CPU stages
#ifdef TANDEM_WITH_CUDA
  std::vector<std::unique_ptr<NcclThreadGroup>> nccl;  // per stage; GPU stages
#endif

  Communicator* comm(int stage, int replica) {
    if (stage < static_cast<int>(threads.size()) && threads[stage]) {
      return &threads[stage]->communicator(replica);
    }
#ifdef TANDEM_WITH_CUDA
    if (stage < static_cast<int>(nccl.size()) && nccl[stage]) {
      return &nccl[stage]->communicator(replica);
    }
#endif
    return nullptr;
  }
  void Abort(const std::string& reason) {
    for (auto& g : threads) {
      if (g) g->Abort(reason);
    }
#ifdef TANDEM_WITH_CUDA
    for (auto& g : nccl) {
      if (g) g->Abort(reason);
    }
#endif
  }
};

// One stage of one replica: its layers, its thread and its per-step state.
struct Pipeline::Worker {
  int replica = 0;
  int stage = 0;
  Device device;
  bool first = false;
  bool last = false;
  std::vector<Layer*> layers;      // the real layers, owned by the model
  std::vector<Dropout*> dropouts;  // see Note [Recompute]
  std::unique_ptr<Sequential> stage_model;  // of StageLayer proxies
  Communicator* comm = nullptr;             // the stage's replica group
  std::unique_ptr<Reducer> reducer;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Loss> loss;

  Channel* fwd_in = nullptr;   // activations from stage - 1
  Channel* fwd_out = nullptr;  // activations to stage + 1
  Channel* bwd_in = nullptr;   // gradients from stage + 1
  Channel* bwd_out = nullptr;  // gradients to stage - 1
  Device next_device, prev_device;
  std::vector<std::unique_ptr<PeerCopy>> fwd_copies, bwd_copies;  // per micro

  // Per step. inputs (first stage) and targets (last stage) are set by Step.
  std::vector<Tensor> inputs, targets;
  std::vector<Tensor> saved;  // the stage's input of each micro-batch
  std::vector<Tensor> dlogits;
  std::vector<std::vector<uint64_t>> dropout_offsets;  // [micro][dropout]
  Tensor loss_total;  // [1]
  StageTimer timer;
  std::thread thread;

  std::string Label() const {
    std::ostringstream out;
    out << "stage " << stage << " of replica " << replica << " (" << device << ")";
    return out.str();
  }

  void Setup(const PipelineOptions& options) {
    for (Layer* layer : layers) MoveTo(*layer, device);
    // See Note [Gradient averaging] in reducer.cc: the loss is normalised by
    // the global batch, and the reducer sums.
    if (comm != nullptr) {
      reducer = std::make_unique<Reducer>(*stage_model, *comm, options.reducer);
    }
    optimizer = MakeOptimizer(options.optimizer, stage_model->Parameters());
    if (last) {
      loss = options.make_loss ? options.make_loss()
                               : std::make_unique<SoftmaxCrossEntropyLoss>();
      TANDEM_CHECK(loss != nullptr) << "pipeline: make_loss returned null";
    }
    const int m = options.micro_batches;
    if (fwd_out != nullptr && IsPeerPair(device, next_device)) {
      for (int i = 0; i < m; ++i) fwd_copies.push_back(MakePeerCopy(device, next_device));
    }
    if (bwd_out != nullptr && IsPeerPair(device, prev_device)) {
      for (int i = 0; i < m; ++i) bwd_copies.push_back(MakePeerCopy(device, prev_device));
    }
    timer.Init(device, 2 * m, options.record_timing);
  }

  // Hands `t` (micro-batch `micro`) to the neighbour; see Note
  // [Cross-device hand-off].
  void Send(Channel& channel, std::vector<std::unique_ptr<PeerCopy>>& copies,
            int micro, const Tensor& t) {
    if (copies.empty()) {
      channel.Push(Handoff{micro, t, nullptr});
      return;
    }
#ifdef TANDEM_WITH_CUDA
    PeerCopy& copy = *copies[micro];
    copy.src = t;
    copy.copied.store(false);
    copy.ready.Record(cuda::ComputeStream(copy.src_device));
    channel.Push(Handoff{micro, Tensor(), &copy});
#endif
  }

  Tensor Receive(Channel& channel, int micro) {
    Handoff item = channel.Pop();
    // Stages send micro-batches in schedule order through FIFO channels.
    TANDEM_CHECK(item.micro == micro)
        << "pipeline " << Label() << ": expected micro-batch " << micro
        << ", received " << item.micro;
    if (item.peer == nullptr) return Local(item.tensor);
#ifdef TANDEM_WITH_CUDA
    PeerCopy& copy = *item.peer;
    const cudaStream_t stream = cuda::ComputeStream(device.index);
    Tensor dst = Tensor::Empty(copy.src.shape(), device);
    CUDA_CHECK(cudaStreamWaitEvent(stream, copy.ready.get(), 0));
    if (dst.numel() > 0) {
      CUDA_CHECK(cudaMemcpyPeerAsync(dst.data(), device.index, copy.src.data(),
                                     copy.src_device, dst.numel() * sizeof(float),
                                     stream))
          << "pipeline " << Label() << ": copying micro-batch " << micro
          << " from cuda:" << copy.src_device;
    }
    copy.consumed.Record(stream);
    copy.copied.store(true);
    return dst;
#else
    return Tensor();
#endif
  }

  // `t` on this stage's device (a handle when it is there already).
  Tensor Local(const Tensor& t) const {
    return t.device() == device ? t : t.To(device);
  }

  void SaveDropoutOffsets(std::vector<uint64_t>& offsets) const {
    offsets.resize(dropouts.size());
    for (size_t i = 0; i < dropouts.size(); ++i) offsets[i] = dropouts[i]->offset();
  }
  void RestoreDropoutOffsets(const std::vector<uint64_t>& offsets) {
    for (size_t i = 0; i < dropouts.size(); ++i) dropouts[i]->set_offset(offsets[i]);
  }

  // The GPipe schedule of one stage: every forward, then every backward.
  void RunStep(int micro_batches, int64_t global_batch) {
    const int m_count = micro_batches;
    timer.NewStep();
    optimizer->ZeroGrad();
    saved.assign(m_count, Tensor());
    dlogits.assign(m_count, Tensor());
    dropout_offsets.assign(m_count, {});
    if (last) loss_total = Tensor::Zeros({1}, device);

    for (int m = 0; m < m_count; ++m) {
      Tensor in = first ? Local(inputs[m]) : Receive(*fwd_in, m);
      saved[m] = in;
      SaveDropoutOffsets(dropout_offsets[m]);
      timer.Begin(m);
      Tensor out = stage_model->Forward(in);
      if (last) {
        Tensor micro_loss = loss->Forward(out, Local(targets[m]), global_batch);
        dlogits[m] = loss->Backward();
        ops::Axpy(1.f, micro_loss, loss_total);
      }
      timer.End(m);
      if (!last) Send(*fwd_out, fwd_copies, m, out);
    }

    std::vector<uint64_t> end_offsets;
    SaveDropoutOffsets(end_offsets);
    for (int m = m_count - 1; m >= 0; --m) {
      Tensor grad = last ? dlogits[m] : Receive(*bwd_in, m);
      timer.Begin(m_count + m);
      if (m != m_count - 1) {
        // See Note [Recompute].
        RestoreDropoutOffsets(dropout_offsets[m]);
        stage_model->Forward(saved[m]);
      }
      Tensor dx;
      if (reducer) {
        // Accumulate locally; all-reduce during the last backward (m = 0),
        // overlapped with it. See parallel/reducer.h.
        reducer->set_sync(m == 0);
        dx = reducer->Backward(grad);
      } else {
        dx = stage_model->Backward(grad);
      }
      timer.End(m_count + m);
      saved[m] = Tensor();
      dlogits[m] = Tensor();
      if (!first) Send(*bwd_out, bwd_copies, m, dx);
    }
    RestoreDropoutOffsets(end_offsets);
    optimizer->Step();
    inputs.clear();
    targets.clear();
  }

  // After a step: see Note [Cross-device hand-off]. Never called while the
  // stage threads run.
  void ReleaseCopies() {
    for (auto* copies : {&fwd_copies, &bwd_copies}) {
      for (auto& copy : *copies) {
        if (!copy->src.defined()) continue;
#ifdef TANDEM_WITH_CUDA
        if (copy->copied.load()) {
          cuda::DeviceGuard guard(copy->src_device);
          CUDA_CHECK(cudaStreamWaitEvent(cuda::ComputeStream(copy->src_device),
                                         copy->consumed.get(), 0));
        }
#endif
        copy->src = Tensor();
      }
    }
  }
};

std::vector<size_t> BalanceStages(Sequential& model, int stages) {
  const size_t layers = model.size();
  TANDEM_CHECK(stages >= 1) << "pipeline: stages must be at least 1, got " << stages;
  TANDEM_CHECK(layers >= static_cast<size_t>(stages))
      << "pipeline: model '" << model.Name() << "' has " << layers
      << " layer(s), too few for " << stages
      << " stages (each stage needs at least one layer)";
  std::vector<int64_t> prefix(layers + 1, 0);
  for (size_t i = 0; i < layers; ++i) {
    prefix[i + 1] = prefix[i] + ParameterCount(model.layer(i));
  }
  // best[k][i]: the smallest largest-stage count splitting layers [0, i) into
  // k stages; from[k][i]: where the last of them begins.
  const int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(layers + 1, kInf));
  std::vector<std::vector<size_t>> from(stages + 1, std::vector<size_t>(layers + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (size_t i = k; i <= layers; ++i) {
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf) continue;
        const int64_t cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (cost < best[k][i]) {
          best[k][i] = cost;
          from[k][i] = j;
        }
      }
    }
  }
  std::vector<size_t> boundaries(stages - 1);
  size_t end = layers;
  for (int k = stages; k > 1; --k) {
    end = from[k][end];
    boundaries[k - 2] = end;
  }
  return boundaries;
}

double GpipeBubbleFraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

Pipeline::Pipeline(std::unique_ptr<Sequential> model, PipelineOptions options)
    : Pipeline(
          [&] {
            std::vector<std::unique_ptr<Sequential>> replicas;
            replicas.push_back(std::move(model));
            return replicas;
          }(),
          std::move(options)) {}

Pipeline::Pipeline(std::vector<std::unique_ptr<Sequential>> replicas,
                   PipelineOptions options)
    : options_(std::move(options)),
      replicas_(static_cast<int>(replicas.size())),
      models_(std::move(replicas)) {
  const int stages = options_.stages;
  const int micro = options_.micro_batches;
  TANDEM_CHECK(stages >= 1) << "pipeline: stages must be at least 1, got " << stages;
  TANDEM_CHECK(micro >= 1) << "pipeline: micro_batches must be at least 1, got " << micro;
  TANDEM_CHECK(replicas_ >= 1) << "pipeline: no model given";
  for (int r = 0; r < replicas_; ++r) {
    TANDEM_CHECK(models_[r] != nullptr) << "pipeline: replica " << r << "'s model is null";
  }
  Sequential& reference = *models_[0];
  for (int r = 1; r < replicas_; ++r) {
    Sequential& other = *models_[r];
    TANDEM_CHECK(other.size() == reference.size())
        << "pipeline: replica " << r << "'s model has " << other.size()
        << " layers but replica 0's has " << reference.size()
        << ": replicas must share one architecture";
    for (size_t i = 0; i < reference.size(); ++i) {
      std::vector<Parameter> a = reference.layer(i).Parameters();
      std::vector<Parameter> b = other.layer(i).Parameters();
      bool same = a.size() == b.size() && reference.layer(i).Name() == other.layer(i).Name();
      for (size_t p = 0; same && p < a.size(); ++p) {
        same = a[p].value->shape() == b[p].value->shape();
      }
      TANDEM_CHECK(same) << "pipeline: layer " << i << " of replica " << r << " is '"
                         << other.layer(i).Describe() << "' but replica 0's is '"
                         << reference.layer(i).Describe()
                         << "': replicas must share one architecture";
    }
  }

  // Devices.
  const size_t workers = static_cast<size_t>(stages) * replicas_;
  if (options_.devices.empty()) options_.devices.assign(workers, Device::Cpu());
  TANDEM_CHECK(options_.devices.size() == workers)
      << "pipeline: " << options_.devices.size() << " device(s) for " << stages
      << " stage(s) x " << replicas_ << " replica(s): expected " << workers
      << ", replica-major (devices[r * stages + s] runs stage s of replica r)";
  for (int r = 0; r < replicas_; ++r) {
    for (int s = 0; s < stages; ++s) {
      const Device d = device(r, s);
      if (!d.is_cuda()) continue;
      const int visible = CudaDeviceCount();
      TANDEM_CHECK(d.index >= 0 && d.index < visible)
          << "pipeline: stage " << s << " of replica " << r << " is on " << d
          << " but " << visible << " CUDA device(s) are visible"
          << (visible == 0 ? " (" + CudaUnavailableReason() + ")" : "");
    }
  }

  // Stage boundaries.
  const size_t layers = reference.size();
  std::vector<size_t> boundaries = options_.boundaries;
  if (boundaries.empty() && stages > 1) {
    boundaries = BalanceStages(reference, stages);
  } else {
    TANDEM_CHECK(layers >= static_cast<size_t>(stages))
        << "pipeline: model '" << reference.Name() << "' has " << layers
        << " layer(s), too few for " << stages
        << " stages (each stage needs at least one layer)";
  }
  TANDEM_CHECK(boundaries.size() == static_cast<size_t>(stages - 1))
      << "pipeline: " << boundaries.size() << " boundaries for " << stages
      << " stages: expected " << stages - 1
      << " (the layer index at which each stage after the first begins)";
  bounds_.push_back(0);
  for (size_t b : boundaries) {
    TANDEM_CHECK(b > bounds_.back() && b < layers)
        << "pipeline: stage boundary " << b << " must be greater than "
        << bounds_.back() << " and less than the model's " << layers
        << " layers: boundaries are increasing layer indices";
    bounds_.push_back(b);
  }
  bounds_.push_back(layers);

  // Replica groups: each stage's replicas all-reduce its gradients.
  groups_ = std::make_unique<Groups>();
  if (replicas_ > 1) {
    groups_->threads.resize(stages);
#ifdef TANDEM_WITH_CUDA
    groups_->nccl.resize(stages);
#endif
    for (int s = 0; s < stages; ++s) {
      std::vector<int> gpus;
      int cpus = 0;
      for (int r = 0; r < replicas_; ++r) {
        if (device(r, s).is_cuda()) {
          TANDEM_CHECK(std::find(gpus.begin(), gpus.end(), device(r, s).index) == gpus.end())
              << "pipeline: two replicas of stage " << s << " are on " << device(r, s)
              << ": NCCL needs one GPU per replica of a stage";
          gpus.push_back(device(r, s).index);
        } else {
          ++cpus;
        }
      }
      TANDEM_CHECK(cpus == 0 || gpus.empty())
          << "pipeline: the replicas of stage " << s
          << " mix CPU and GPU devices; a stage's replicas must all be on "
             "CPUs or all on GPUs";
      if (gpus.empty()) {
        groups_->threads[s] = std::make_unique<ThreadGroup>(replicas_);
      } else {
#ifdef TANDEM_WITH_CUDA
        groups_->nccl[s] = std::make_unique<NcclThreadGroup>(gpus);
#endif
      }
    }
  }

  // Neighbouring GPUs copy straight from each other.
  for (int r = 0; r < replicas_; ++r) {
    for (int s = 0; s + 1 < stages; ++s) {
      if (IsPeerPair(device(r, s), device(r, s + 1))) {
        EnablePeerAccess(device(r, s).index, device(r, s + 1).index);
        EnablePeerAccess(device(r, s + 1).index, device(r, s).index);
      }
    }
  }

  // Workers and the channels between them.
  for (int r = 0; r < replicas_; ++r) {
    std::vector<Channel*> fwd(stages, nullptr), bwd(stages, nullptr);
    for (int s = 0; s + 1 < stages; ++s) {
      const std::string where = "replica " + std::to_string(r) + ": stage " +
                                std::to_string(s) + " -> " + std::to_string(s + 1);
      channels_.push_back(std::make_unique<Channel>(where + " activations", micro));
      fwd[s] = channels_.back().get();
      channels_.push_back(std::make_unique<Channel>(where + " gradients", micro));
      bwd[s] = channels_.back().get();
    }
    for (int s = 0; s < stages; ++s) {
      auto w = std::make_unique<Worker>();
      w->replica = r;
      w->stage = s;
      w->device = device(r, s);
      w->first = s == 0;
      w->last = s == stages - 1;
      Sequential& model = *models_[r];
      w->stage_model = std::make_unique<Sequential>(model.Name() + ".stage" + std::to_string(s));
      w->stage_model->SetTraining(model.training());
      for (size_t i = bounds_[s]; i < bounds_[s + 1]; ++i) {
        Layer& layer = model.layer(i);
        w->layers.push_back(&layer);
        if (auto* dropout = dynamic_cast<Dropout*>(&layer)) w->dropouts.push_back(dropout);
        w->stage_model->Add(std::make_unique<StageLayer>(layer));
      }
      // The previous stage needs this stage's input gradient, whatever the
      // model told its layer (a model's first layer skips it: its input is
      // data).
      if (s > 0) w->stage_model->SetNeedsInputGrad(true);
      w->comm = groups_->comm(s, r);
      if (s > 0) {
        w->fwd_in = fwd[s - 1];
        w->bwd_out = bwd[s - 1];
        w->prev_device = device(r, s - 1);
      }
      if (s + 1 < stages) {
        w->fwd_out = fwd[s];
        w->bwd_in = bwd[s];
        w->next_device = device(r, s + 1);
      }
      workers_.push_back(std::move(w));
    }
  }

  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->thread = std::thread([this, worker] { WorkerLoop(*worker); });
  }
  RunPhase(Phase::kSetup);
  if (!failure_.empty() || !consequence_.empty()) {
    const std::string message = failure_.empty() ? consequence_ : failure_;
    Stop();
    TANDEM_CHECK(false) << message;
  }
}

Pipeline::~Pipeline() { Stop(); }

void Pipeline::Stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

Pipeline::Worker& Pipeline::worker(int replica, int stage) {
  return *workers_[static_cast<size_t>(replica) * options_.stages + stage];
}

Device Pipeline::device(int replica, int stage) const {
  return options_.devices.at(static_cast<size_t>(replica) * options_.stages + stage);
}

int64_t Pipeline::stage_parameter_count(int stage) {
  int64_t n = 0;
  for (size_t i = stage_first_layer(stage); i < stage_end_layer(stage); ++i) {
    n += ParameterCount(models_[0]->layer(i));
  }
  return n;
}

std::vector<Parameter> Pipeline::Parameters(int replica) {
  return models_.at(replica)->Parameters();
}

void Pipeline::WorkerLoop(Worker& w) {
  uint64_t seen = 0;
  for (;;) {
    Phase phase;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      phase = phase_;
    }
    std::string error;
    bool consequence = false;
    try {
      BindThreadToDevice(w.device);
      if (phase == Phase::kSetup) {
        w.Setup(options_);
      } else {
        w.RunStep(options_.micro_batches, global_batch_);
      }
    } catch (const StageAbortedError& e) {
      error = e.what();
      consequence = true;
    } catch (const CollectiveAbortedError& e) {
      error = e.what();
      consequence = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty()) {
      const std::string message = "pipeline " + w.Label() + " failed: " + error;
      {
        // Recorded before the abort, so that the errors the abort causes in
        // other stages (whatever their type) come second.
        std::lock_guard<std::mutex> lock(mu_);
        std::string& slot = consequence ? consequence_ : failure_;
        if (slot.empty()) slot = message;
      }
      if (!consequence) AbortAll(message);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--running_ == 0) cv_.notify_all();
    }
  }
}

void Pipeline::RunPhase(Phase phase) {
  std::unique_lock<std::mutex> lock(mu_);
  phase_ = phase;
  running_ = static_cast<int>(workers_.size());
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return running_ == 0; });
}

void Pipeline::AbortAll(const std::string& reason) {
  for (auto& channel : channels_) channel->Abort(reason);
  groups_->Abort(reason);
}

void Pipeline::ReleaseHandoffs() {
  for (auto& w : workers_) w->ReleaseCopies();
}

void Pipeline::Step(const Tensor& x, const Tensor& targets) {
  TANDEM_CHECK(!broken_) << "pipeline: an earlier step failed ("
                         << (failure_.empty() ? consequence_ : failure_)
                         << "); build a new Pipeline";
  TANDEM_CHECK(x.defined() && targets.defined()) << "pipeline: Step needs x and targets";
  TANDEM_CHECK(x.rank() >= 1 && targets.rank() >= 1 && x.dim(0) == targets.dim(0))
      << "pipeline: x " << ShapeToString(x.shape()) << " and targets "
      << ShapeToString(targets.shape())
      << " must have the same batch size (dimension 0)";
  const int64_t batch = x.dim(0);
  const int stages = options_.stages;
  const int micro = options_.micro_batches;
  for (int r = 0; r < replicas_; ++r) {
    const ShardRange shard = Shard(batch, r, replicas_);
    TANDEM_CHECK(shard.size() >= micro)
        << "pipeline: a batch of " << batch << " example(s) gives replica " << r
        << " " << shard.size() << ", fewer than micro_batches=" << micro
        << ": every micro-batch needs at least one example";
    Worker& first = worker(r, 0);
    Worker& last = worker(r, stages - 1);
    first.inputs.assign(micro, Tensor());
    last.targets.assign(micro, Tensor());
    for (int m = 0; m < micro; ++m) {
      const ShardRange part = Shard(shard.size(), m, micro);
      first.inputs[m] = x.Slice(shard.begin + part.begin, shard.begin + part.end);
      last.targets[m] = targets.Slice(shard.begin + part.begin, shard.begin + part.end);
    }
  }
  global_batch_ = batch;
  RunPhase(Phase::kStep);
  ReleaseHandoffs();
  if (!failure_.empty() || !consequence_.empty()) {
    broken_ = true;
    TANDEM_CHECK(false) << (failure_.empty() ? consequence_ : failure_);
  }
  ++steps_;
}

float Pipeline::LastLoss() {
  TANDEM_CHECK(steps_ > 0) << "pipeline: LastLoss before the first Step";
  float total = 0.f;
  for (int r = 0; r < replicas_; ++r) total += worker(r, options_.stages - 1).loss_total.Item();
  return total;
}

std::vector<double> Pipeline::LastBusySeconds(int replica) {
  TANDEM_CHECK(options_.record_timing)
      << "pipeline: LastBusySeconds needs PipelineOptions::record_timing";
  TANDEM_CHECK(steps_ > 0) << "pipeline: LastBusySeconds before the first Step";
  std::vector<double> seconds;
  for (int s = 0; s < options_.stages; ++s) {
    seconds.push_back(worker(replica, s).timer.BusySeconds());
  }
  return seconds;
}

}  // namespace tandem
