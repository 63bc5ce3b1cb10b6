// What an NcclCommunicator shares with the Work it returns and the reduce
// buffers it hands out, all of which may outlive it: the NCCL handle with
// the lock and abort flag that guard it (NcclCommState), a pool of lane
// events (LaneEventPool), and the Work of one collective (NcclWork).
//
// Internal to parallel/'s NCCL communicator; tests reach it for the pool.
//
//   auto pool = std::make_shared<LaneEventPool>(backend);
//   std::unique_ptr<LaneEvent> done = pool->Take(/*timing=*/false);
//   backend.Record(LaneEventPool::Inner(*done), lane);
//   done.reset();   // back to the pool: the next Take creates no event
#ifndef TANDEM_PARALLEL_NCCL_WORK_H_
#define TANDEM_PARALLEL_NCCL_WORK_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/lane.h"
#include "parallel/nccl_check.h"
#include "parallel/nccl_handle.h"
#include "parallel/work.h"

namespace tandem {

// One NCCL rank's handle and what guards it. See Note [Abort] in
// nccl_work.cc for the locking rule.
class NcclCommState {
 public:
  // `description` names the communicator in errors ("NcclCommunicator(rank
  // 0 of 2, cuda:0, NCCL 2.28.9)").
  NcclCommState(NcclComm comm, std::string description);

  const std::string& description() const { return description_; }

  // Runs `call(comm)` under the call lock unless the communicator is gone;
  // throws CollectiveAbortedError after Abort, tandem::Error (naming
  // `context`) for a failed call.
  template <typename Call>
  void Run(const std::string& context, Call call);
  // Runs `call(comm)` under the call lock if the communicator is still live
  // (neither aborted nor destroyed); returns whether it ran. Never throws
  // unless `call` does. For releasing what the communicator registered.
  template <typename Call>
  bool RunIfLive(Call call);

  // Aborts: the first reason is kept, every later or waiting collective
  // throws CollectiveAbortedError("collective aborted: <reason>"). Any
  // thread, any number of times.
  void Abort(const std::string& reason);
  // Abort in two halves, for a caller with something to do between them:
  // BeginAbort sets the flag (every later call and wait throws) and returns
  // false if the communicator was already aborted; FinishAbort releases it
  // (ncclCommAbort), which may wait for the device.
  bool BeginAbort(const std::string& reason);
  void FinishAbort();
  bool aborted() const { return aborted_.load(); }
  void ThrowIfAborted() const;
  // Destroys the handle (ncclCommDestroy) unless Abort released it; the
  // caller has made sure the device no longer runs this rank's work.
  void Destroy();

  // NCCL's asynchronous error (ncclCommGetAsyncError): ncclSuccess while
  // none, or once the communicator is gone. Throws after Abort.
  ncclResult_t AsyncError();

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_.store(timeout.count()); }
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(timeout_ms_.load());
  }

 private:
  const std::string description_;
  NcclComm comm_;
  std::timed_mutex call_mu_;  // held for every NCCL call on comm_
  std::atomic<bool> aborted_{false};
  std::atomic<bool> destroyed_{false};  // set under call_mu_
  mutable std::mutex reason_mu_;
  std::string reason_;
  std::atomic<int64_t> timeout_ms_{300 * 1000};
};

// Recycled events of one backend, so that a training step creates none.
// Take hands out an event that returns to the pool when it is destroyed; a
// Work owns its events, so an event is reused only once nobody can wait on
// it any more (a lane's wait binds to the record it follows, so a later
// record does not disturb it). Thread-safe; events may be returned from any
// thread, after the pool's owner is gone.
class LaneEventPool : public std::enable_shared_from_this<LaneEventPool> {
 public:
  explicit LaneEventPool(std::shared_ptr<Backend> backend);

  std::unique_ptr<LaneEvent> Take(bool timing);
  // The backend's own event inside a pooled one, for Backend::Record and
  // Backend::Wait (which take only their own kind of event).
  static LaneEvent& Inner(LaneEvent& event);
  static const LaneEvent& Inner(const LaneEvent& event);

  // How many events the pool has created so far.
  int created() const;

 private:
  class Pooled;
  void Return(std::unique_ptr<LaneEvent> event, bool timing);

  // Free events kept per kind; more are destroyed.
  static constexpr size_t kKeep = 64;
  const std::shared_ptr<Backend> backend_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<LaneEvent>> free_[2];  // [timing]
  int created_ = 0;
};

// The Work of one NCCL collective: an event recorded on the communication
// lane after it. WaitOn(lane) makes the lane wait for that event (the host
// does not); Wait() polls it on the host together with the abort flag, NCCL's
// asynchronous errors and the timeout (Note [Abort]).
class NcclWork final : public Work {
 public:
  // `name`: "<communicator>: <collective>", for errors.
  NcclWork(std::shared_ptr<NcclCommState> state, std::string name,
           std::shared_ptr<LaneEvent> done, std::unique_ptr<LaneEvent> started,
           std::unique_ptr<LaneEvent> finished);

  void Wait() override;
  void WaitOn(const Lane& lane) override;
  bool ReadyForLanes() const override { return true; }
  bool IsCompleted() const override;

 private:
  // The event's state; a CUDA error becomes an error naming the collective
  // (or CollectiveAbortedError after Abort).
  bool Done() const;
  // After Wait's timeout or an asynchronous error: aborts and throws.
  [[noreturn]] void Fail(const std::string& why);

  const std::shared_ptr<NcclCommState> state_;
  const std::string name_;
  const std::shared_ptr<LaneEvent> done_;  // shared with the watchdog
};

// ---------------------------------------------------------------------------

template <typename Call>
void NcclCommState::Run(const std::string& context, Call call) {
  ncclResult_t result = ncclSuccess;
  ThrowIfAborted();  // before the lock, which FinishAbort may hold long
  {
    std::lock_guard<std::timed_mutex> lock(call_mu_);
    ThrowIfAborted();
    TANDEM_CHECK(!destroyed_.load()) << context << ": the communicator was destroyed";
    result = call(comm_.get());
  }
  if (result == ncclSuccess) return;
  ThrowIfAborted();  // the call failed because another thread aborted
  NCCL_CHECK(result) << context;
}

template <typename Call>
bool NcclCommState::RunIfLive(Call call) {
  if (aborted_.load()) return false;  // before the lock, as in Run
  std::lock_guard<std::timed_mutex> lock(call_mu_);
  if (aborted_.load() || destroyed_.load()) return false;
  call(comm_.get());
  return true;
}

}  // namespace tandem

#endif  // TANDEM_PARALLEL_NCCL_WORK_H_
