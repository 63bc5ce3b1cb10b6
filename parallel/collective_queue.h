// CollectiveQueue: where the host transports (ThreadCommunicator,
// MpiCommunicator) run their collectives. Each communicator owns one queue;
// the queue owns one progress thread that runs the queued collectives
// strictly in the order they were queued, each completing the HostWork its
// Enqueue returned, and watches the running one with a CollectiveWatchdog
// when the transport asks for it.
//
//   CollectiveQueueOptions options;
//   options.owner = Describe();                        // names it in messages
//   options.run = [this](const Collective& c) { Exchange(c); };  // may throw
//   CollectiveQueue queue(std::move(options));
//   std::shared_ptr<Work> work = queue.Enqueue(c);     // returns at once
//   ...                                                // the caller goes on
//   work->Wait();                                      // rethrows Exchange's error
//
// See Note [Collective queue] in collective_queue.cc for the rules: order,
// failures, Abort, and what destruction does to collectives still queued.
#ifndef TANDEM_PARALLEL_COLLECTIVE_QUEUE_H_
#define TANDEM_PARALLEL_COLLECTIVE_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/collective_watchdog.h"
#include "parallel/communicator.h"
#include "parallel/work.h"

namespace tandem {

// The Work of a collective run on the host. Wait blocks on a condition
// variable and rethrows the collective's exception with its type kept (a
// CollectiveAbortedError stays one), every time it is called; see Note
// [Errors across threads] in collective_queue.cc. Timed works carry
// host-clock events (CPU timing LaneEvents) recorded by the progress thread
// just before and just after the collective ran; their Query, Synchronize
// and ElapsedMsSince wait for the collective as a device event waits for
// its lane.
class HostWork final : public Work {
 public:
  explicit HostWork(bool timed);

  void Wait() override;
  // The result is in host memory, which every lane reads: Wait().
  void WaitOn(const Lane& lane) override;
  bool ReadyForLanes() const override { return IsCompleted(); }
  bool IsCompleted() const override;

  // For the progress thread: records started() if timed.
  void MarkStarted();
  // For the progress thread: records finished() if timed, stores `error`
  // (null: success) and wakes every waiter. Once only.
  void Finish(std::exception_ptr error);

 private:
  class Event;
  // Blocks until Finish; never throws.
  void WaitFinished() const;

  // What Wait throws; see Note [Errors across threads].
  enum class Thrown { kNothing, kError, kAborted, kOther };

  mutable std::mutex mutex_;
  mutable std::condition_variable finished_cv_;
  bool done_ = false;
  Thrown thrown_ = Thrown::kNothing;
  std::string message_;      // kError, kAborted
  std::exception_ptr error_;  // kOther
};

struct CollectiveQueueOptions {
  // The owning communicator, for messages: "MpiCommunicator(rank 0 of 2, ...)".
  std::string owner;
  // Runs one collective on the progress thread: the transport's exchange.
  // An exception it throws fails that collective's Work.
  std::function<void(const Collective&)> run;
  // When set, each running collective is watched (CollectiveWatchdog): one
  // still running after `timeout` calls this, on the watchdog's thread,
  // with "<owner>: <kind> #<n> (<bytes> bytes) did not finish within ...".
  // For transports that cannot interrupt a collective (MPI); it is expected
  // to end the job.
  std::function<void(const std::string&)> on_timeout;
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(60);
};

class CollectiveQueue {
 public:
  explicit CollectiveQueue(CollectiveQueueOptions options);
  // Fails every collective still queued with CollectiveAbortedError, waits
  // for the running one to return, joins the thread. Never throws. See Note
  // [Collective queue].
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues `c` behind every collective queued before it and returns its
  // Work at once. The buffers `c` names must stay valid until the Work has
  // completed. After Abort (or a failure) it returns an already failed Work.
  std::shared_ptr<Work> Enqueue(const Collective& c);

  // Every collective queued and not yet started, and every one queued
  // later, fails with CollectiveAbortedError("collective aborted: <reason>").
  // The running one is not interrupted: waking it is the transport's job.
  // Callable from any thread; the first reason is kept.
  void Abort(const std::string& reason);
  bool aborted() const;

  // The watchdog's limit (only with on_timeout); applies at once, also to
  // the collective running now.
  void set_timeout(std::chrono::steady_clock::duration timeout);

 private:
  struct Item {
    Collective collective;
    std::shared_ptr<HostWork> work;
  };

  void Loop();
  void Run(Item& item);
  // Under mutex_: fails every queued item with the abort text.
  void FailQueuedLocked();
  // Under mutex_: starts the thread (and watchdog) on first use.
  void StartLocked();

  const CollectiveQueueOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable queued_cv_;
  std::deque<Item> items_;
  bool stopping_ = false;
  // "collective aborted: <reason>" once aborted; "" before.
  std::string abort_text_;
  std::chrono::steady_clock::duration timeout_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COLLECTIVE_QUEUE_H_
