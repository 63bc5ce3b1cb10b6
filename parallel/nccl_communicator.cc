#include "parallel/nccl_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "parallel/nccl_check.h"
#include "parallel/nccl_work.h"

namespace tandem {

// Note [Communication lane]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Each NcclCommunicator owns a lane of its device (Backend::NewLane, high
// priority, so that communication kernels start ahead of queued compute),
// and every NCCL call runs on that lane's stream. The lane is ordered
// against the others only where the code says so, with events; the host
// never blocks for the ordering:
//   1. before the collective, the lane waits (ops::WaitFor) for every lane in
//      CollectiveOptions::after, by default the device's main lane: the
//      collective reads what the work queued there so far wrote;
//   2. the collective is queued on the lane;
//   3. an event recorded on the lane marks its end and completes its Work:
//      Work::WaitOn(lane) makes another lane wait for that event, so its
//      later kernels read (or overwrite) the buffer only after the
//      collective; Work::Wait() polls the event on the host, watching for
//      Abort, NCCL's asynchronous errors and the timeout (Note [Abort] in
//      nccl_work.cc).
// A caller that reads the result without either wait races with NCCL; a
// buffer must stay allocated until the lanes that use it have waited (Note
// [Stream-ordered reuse] in core/cuda/caching_allocator.h).
//
// Barrier skips step 1: it all-reduces one float of the communicator's own
// scratch, so it need not wait for any lane, and its Wait() returns only
// after the all-reduce completed on every rank, which is what makes it a
// barrier.
//
// Events come from a pool (LaneEventPool) and go back when their Work is
// destroyed, so the steps of a training run create no CUDA events.

namespace {

ncclRedOp_t ToNccl(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclAvg; }

// bfloat16 is native in every NCCL this builds against (ncclBfloat16 came
// with NCCL 2.10; ncclMemAlloc and ncclConfig_t, which this code needs, came
// later).
ncclDataType_t ToNccl(DType dtype) {
  return dtype == DType::kBFloat16 ? ncclBfloat16 : ncclFloat;
}

// The NCCL call of `c`, queued on `stream`.
ncclResult_t Enqueue(const Collective& c, float* scratch, ncclComm_t comm, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(c.count);
  const ncclDataType_t type = ToNccl(c.dtype);
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      return ncclAllReduce(c.data, c.data, n, type, ToNccl(c.op), comm, stream);
    case CollectiveKind::kBroadcast:
      return ncclBroadcast(c.data, c.data, n, type, c.root, comm, stream);
    case CollectiveKind::kAllGather:
      return ncclAllGather(c.send, c.data, n, type, comm, stream);
    case CollectiveKind::kReduceScatter:
      return ncclReduceScatter(c.send, c.data, n, type, ToNccl(c.op), comm, stream);
    case CollectiveKind::kBarrier:
      return ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, comm, stream);
    case CollectiveKind::kWindowRegister:
      break;
  }
  throw Error(std::string("NcclCommunicator cannot run a collective of kind '") +
              ToString(c.kind) + "'");
}

// Note [Watchdog and abort]: the watchdog gives up only on collectives of a
// live communicator. One aborted from elsewhere (the launcher, after another
// worker failed; a test) is left alone: its waiters already throw, and host
// waits stay as they are.
std::unique_ptr<DeviceCollectiveWatchdog> MakeWatchdog(std::shared_ptr<NcclCommState> state) {
  DeviceCollectiveWatchdog::Hooks hooks;
  hooks.async_error = [state]() -> std::string {
    if (state->aborted()) return "";
    const ncclResult_t async = state->AsyncError();
    if (async == ncclSuccess || async == ncclInProgress) return "";
    return internal::NcclErrorText(async);
  };
  // Host waits are abandoned before ncclCommAbort: it frees device memory,
  // which waits for the device, and a device held by something other than
  // NCCL's kernels (a stalled kernel of the step) would hold it too.
  hooks.abort = [state](const std::string& why) {
    if (!state->BeginAbort(why)) return;
    std::fprintf(stderr, "tandem: %s\n", why.c_str());
    cuda::AbandonHostWaits(why);
    state->FinishAbort();
  };
  const std::string owner = state->description();
  return std::make_unique<DeviceCollectiveWatchdog>(
      owner, [state] { return state->timeout(); }, std::move(hooks));
}

std::string Description(int rank, int size, int device) {
  return "NcclCommunicator(rank " + std::to_string(rank) + " of " + std::to_string(size) +
         ", cuda:" + std::to_string(device) + ", NCCL " + NcclVersionText() + ")";
}

}  // namespace

NcclCommunicator::NcclCommunicator(NcclComm comm, int rank, int size, int device,
                                   bool single_node)
    : rank_(rank),
      size_(size),
      device_(device),
      single_node_(single_node),
      description_(Description(rank, size, device)),
      symmetric_memory_(CurrentNcclTuning(size, single_node).symmetric_memory),
      state_(std::make_shared<NcclCommState>(std::move(comm), description_)) {
  TANDEM_CHECK(rank >= 0 && rank < size) << description_ << ": rank " << rank
                                          << " is not in [0, " << size << ")";
  state_->set_timeout(kDefaultTimeout);
  watchdog_ = MakeWatchdog(state_);
  Backend& backend = GetBackend(Device::Cuda(device));
  lane_ = backend.NewLane({"nccl", /*high_priority=*/true});
  events_ = std::make_shared<LaneEventPool>(SharedBackend(Device::Cuda(device)));
  // Zeroed on the main lane; the communication lane waits for it once.
  scratch_ = Tensor::Zeros({1}, Device::Cuda(device));
  ops::WaitFor(lane_.get(), backend.main_lane());
}

NcclCommunicator::~NcclCommunicator() {
  // Collectives still queued use NCCL's buffers and scratch_ (even after
  // Abort, until their kernels have exited).
  try {
    cuda::DeviceGuard guard(device_);
    lane_.get().backend().Synchronize(lane_.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: %s: ignoring %s while waiting for the communication lane\n",
                 description_.c_str(), e.what());
  }
  watchdog_.reset();
  state_->Destroy();
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::Create(Communicator& host, int device) {
  const ncclUniqueId id = BroadcastNcclUniqueId(host);
  // See Note [NCCL tuning] in nccl_handle.h.
  const bool single_node = host.single_node();
  NcclComm comm = NcclComm::InitRank(host.size(), id, host.rank(), device,
                                     CurrentNcclTuning(host.size(), single_node),
                                     host.Describe());
  return std::make_unique<NcclCommunicator>(std::move(comm), host.rank(), host.size(), device,
                                            single_node);
}

void NcclCommunicator::Abort(const std::string& reason) { state_->Abort(reason); }

bool NcclCommunicator::aborted() const { return state_->aborted(); }

void NcclCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  TANDEM_CHECK(timeout.count() > 0) << description_ << ": the timeout must be positive, got "
                                    << timeout.count() << " ms";
  state_->set_timeout(timeout);
}

std::chrono::milliseconds NcclCommunicator::timeout() const { return state_->timeout(); }

int NcclCommunicator::events_created() const { return events_->created(); }

void NcclCommunicator::FollowLanes(const Collective& c, const Lane& lane) const {
  if (c.options.after.empty()) {
    ops::WaitFor(lane, GetBackend(Device::Cuda(device_)).main_lane());
    return;
  }
  for (const Lane& producer : c.options.after) {
    TANDEM_CHECK(producer.valid()) << Context(c) << ": CollectiveOptions::after names no lane";
    ops::WaitFor(lane, producer);
  }
}

// See Note [Communication lane].
std::shared_ptr<Work> NcclCommunicator::Start(const Collective& c) {
  state_->ThrowIfAborted();
  const bool barrier = c.kind == CollectiveKind::kBarrier;
  if (c.count == 0 && !barrier) return std::make_shared<CompletedWork>();
  cuda::DeviceGuard guard(device_);
  const Lane lane = lane_.get();
  Backend& backend = lane.backend();
  if (!barrier) FollowLanes(c, lane);
  std::unique_ptr<LaneEvent> started;
  std::unique_ptr<LaneEvent> finished;
  if (c.options.timed) {
    started = events_->Take(/*timing=*/true);
    backend.Record(LaneEventPool::Inner(*started), lane);
  }
  // Formatted once per collective: the watchdog's name, and the Work's with
  // the communicator in front.
  std::string collective = c.Name();
  std::string name = description_ + ": " + collective;
  const cudaStream_t stream = cuda::NativeStream(lane);
  float* scratch = scratch_.data();
  state_->Run(name, [&](ncclComm_t comm) { return Enqueue(c, scratch, comm, stream); });
  if (c.options.timed) {
    finished = events_->Take(/*timing=*/true);
    backend.Record(LaneEventPool::Inner(*finished), lane);
  }
  std::shared_ptr<LaneEvent> done = events_->Take(/*timing=*/false);
  backend.Record(LaneEventPool::Inner(*done), lane);
  watchdog_->Watch(std::move(collective), [done] { return done->Query(); });
  return std::make_shared<NcclWork>(state_, std::move(name), std::move(done), std::move(started),
                                    std::move(finished));
}

}  // namespace tandem
