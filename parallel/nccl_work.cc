#include "parallel/nccl_work.h"

#include <cstdio>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/cuda/host_wait.h"
#include "parallel/communicator.h"

namespace tandem {

// Note [Abort]
// ~~~~~~~~~~~~
// An NCCL kernel waits on the GPU for its peers' data. If a rank fails and
// never issues the collective, the others' kernels (and any host thread
// waiting for them) would wait forever. ncclCommAbort sets the flag those
// kernels and NCCL's own host-side waits poll, so they give up, and then
// releases the communicator.
//
// Releasing is the hazard: NCCL calls are not safe against another thread
// freeing their communicator. So every NCCL call on the handle runs under
// NcclCommState's call lock, and Abort first sets the abort flag and then
// takes the lock before ncclCommAbort: a call that starts afterwards sees
// the flag and throws instead of touching the freed communicator. Work::Wait
// waits for the GPU by polling the collective's event, taking the call lock
// only for each ncclCommGetAsyncError, so an abort from another thread gets
// the lock within microseconds and the waiting thread throws
// CollectiveAbortedError at its next poll.
//
// One NCCL call can itself wait on the host for peers: a rank's first
// collective of a kind sets up its connections to the peers (NCCL's runtime
// connection, on by default), which needs the peers to make the same call.
// If a peer never does, that call does not return by itself, and holds the
// lock. Abort therefore waits for the lock only kAbortWaitForCall, then
// calls ncclCommAbort anyway: NCCL's connection setup polls the abort flag
// and returns, which is how NCCL means a stuck call to be freed from another
// thread. That is the one case where the communicator is released while the
// stuck thread is still returning from NCCL.

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kAbortWaitForCall{2};

}  // namespace

// ---------------------------------------------------------------------------
// NcclCommState

NcclCommState::NcclCommState(NcclComm comm, std::string description)
    : description_(std::move(description)), comm_(std::move(comm)) {}

void NcclCommState::ThrowIfAborted() const {
  if (!aborted_.load()) return;
  std::lock_guard<std::mutex> lock(reason_mu_);
  throw CollectiveAbortedError("collective aborted: " + reason_);
}

// See Note [Abort].
void NcclCommState::Abort(const std::string& reason) {
  if (BeginAbort(reason)) FinishAbort();
}

bool NcclCommState::BeginAbort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(reason_mu_);
  if (aborted_.load()) return false;
  reason_ = reason;
  aborted_.store(true);
  return true;
}

void NcclCommState::FinishAbort() {
  std::unique_lock<std::timed_mutex> call(call_mu_, std::defer_lock);
  if (!call.try_lock_for(kAbortWaitForCall)) {
    std::fprintf(stderr,
                 "tandem: %s: an NCCL call is still waiting for the other ranks; aborting "
                 "under it (see Note [Abort])\n",
                 description_.c_str());
  }
  if (!destroyed_.load()) comm_.Abort();
}

void NcclCommState::Destroy() {
  NcclComm comm;
  {
    std::lock_guard<std::timed_mutex> lock(call_mu_);
    if (aborted_.load() || destroyed_.load()) return;  // ncclCommAbort released it
    destroyed_.store(true);
    comm = std::move(comm_);
  }
  comm.Destroy();
}

ncclResult_t NcclCommState::AsyncError() {
  ncclResult_t async = ncclSuccess;
  ncclResult_t query = ncclSuccess;
  // Before the lock: FinishAbort may hold it while ncclCommAbort waits for
  // the device.
  ThrowIfAborted();
  {
    std::lock_guard<std::timed_mutex> lock(call_mu_);
    ThrowIfAborted();
    if (destroyed_.load()) return ncclSuccess;
    query = ncclCommGetAsyncError(comm_.get(), &async);
  }
  NCCL_CHECK(query) << description_ << ": asking NCCL for asynchronous errors";
  return async;
}

// ---------------------------------------------------------------------------
// LaneEventPool

class LaneEventPool::Pooled final : public LaneEvent {
 public:
  Pooled(std::shared_ptr<LaneEventPool> pool, std::unique_ptr<LaneEvent> event, bool timing)
      : pool_(std::move(pool)), event_(std::move(event)), timing_(timing) {}
  ~Pooled() override { pool_->Return(std::move(event_), timing_); }

  bool Query() const override { return event_->Query(); }
  void Synchronize() const override { event_->Synchronize(); }
  double ElapsedMsSince(const LaneEvent& start) const override {
    return event_->ElapsedMsSince(Inner(start));
  }
  LaneEvent& inner() const { return *event_; }

 private:
  const std::shared_ptr<LaneEventPool> pool_;
  std::unique_ptr<LaneEvent> event_;
  const bool timing_;
};

LaneEventPool::LaneEventPool(std::shared_ptr<Backend> backend) : backend_(std::move(backend)) {
  TANDEM_CHECK(backend_ != nullptr) << "LaneEventPool needs a backend";
  // Return never allocates: it keeps at most kKeep of each kind.
  free_[0].reserve(kKeep);
  free_[1].reserve(kKeep);
}

std::unique_ptr<LaneEvent> LaneEventPool::Take(bool timing) {
  std::unique_ptr<LaneEvent> event;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::unique_ptr<LaneEvent>>& free = free_[timing ? 1 : 0];
    if (!free.empty()) {
      event = std::move(free.back());
      free.pop_back();
    } else {
      ++created_;
    }
  }
  if (event == nullptr) event = backend_->NewEvent(timing);
  return std::make_unique<Pooled>(shared_from_this(), std::move(event), timing);
}

void LaneEventPool::Return(std::unique_ptr<LaneEvent> event, bool timing) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::unique_ptr<LaneEvent>>& free = free_[timing ? 1 : 0];
  if (free.size() < kKeep) free.push_back(std::move(event));
  // else: `event` is destroyed here
}

int LaneEventPool::created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

LaneEvent& LaneEventPool::Inner(LaneEvent& event) {
  auto* pooled = dynamic_cast<Pooled*>(&event);
  return pooled != nullptr ? pooled->inner() : event;
}

const LaneEvent& LaneEventPool::Inner(const LaneEvent& event) {
  const auto* pooled = dynamic_cast<const Pooled*>(&event);
  return pooled != nullptr ? pooled->inner() : event;
}

// ---------------------------------------------------------------------------
// NcclWork

NcclWork::NcclWork(std::shared_ptr<NcclCommState> state, std::string name,
                   std::shared_ptr<LaneEvent> done, std::unique_ptr<LaneEvent> started,
                   std::unique_ptr<LaneEvent> finished)
    : state_(std::move(state)), name_(std::move(name)), done_(std::move(done)) {
  started_ = std::move(started);
  finished_ = std::move(finished);
}

bool NcclWork::Done() const {
  try {
    return done_->Query();
  } catch (const Error& e) {
    state_->ThrowIfAborted();  // an aborted kernel may end with an error
    throw Error(name_ + ": " + e.what());
  }
}

bool NcclWork::IsCompleted() const { return Done(); }

void NcclWork::WaitOn(const Lane& lane) {
  state_->ThrowIfAborted();
  TANDEM_CHECK(lane.valid()) << name_ << ": WaitOn was given no lane";
  if (lane.device().is_cpu()) {
    Wait();  // a CPU lane is the host
    return;
  }
  lane.backend().Wait(lane, LaneEventPool::Inner(*done_));
}

// See Note [Abort].
void NcclWork::Wait() {
  cuda::CountHostWait();
  const Clock::time_point start = Clock::now();
  while (true) {
    if (Done()) {
      // An aborted kernel also ends the lane's work, with garbage results.
      state_->ThrowIfAborted();
      return;
    }
    const ncclResult_t async = state_->AsyncError();
    if (async != ncclSuccess && async != ncclInProgress) {
      // NCCL's rule: after an asynchronous error the communicator is unusable
      // and must be aborted.
      Fail(name_ + ": " + internal::NcclErrorText(async) + " (reported asynchronously)");
    }
    const Clock::duration waited = Clock::now() - start;
    const std::chrono::milliseconds timeout = state_->timeout();
    if (waited > timeout) {
      Fail(name_ + " did not complete within " + std::to_string(timeout.count()) +
           " ms: a rank may have skipped this collective or died (every rank must issue the "
           "same collectives in the same order)");
    }
    // Most collectives end within microseconds to milliseconds: spin politely
    // first, then sleep, so that a long wait costs no core.
    if (waited < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void NcclWork::Fail(const std::string& message) {
  state_->Abort(message);
  throw Error(message);
}

}  // namespace tandem
