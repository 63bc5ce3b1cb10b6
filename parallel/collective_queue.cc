#include "parallel/collective_queue.h"

#include <optional>
#include <typeinfo>
#include <utility>

#include "core/backend_registry.h"

namespace tandem {

// Note [Collective queue]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A host transport's collectives run on one progress thread per
// communicator, in the order the preamble numbered them (FIFO): every rank
// then runs the same collectives in the same order, whatever its caller does
// meanwhile, and the caller's thread is free from the moment Enqueue
// returns. The caller keeps the buffers alive until the Work completes.
//
// Failures. An exception from the transport's run fails that collective's
// Work (Wait rethrows it, type kept) and aborts the queue: a rank whose
// collective failed cannot pair its later ones with its peers' (they may
// have failed at another point, or be waiting in the failed one), so every
// later collective fails at once with CollectiveAbortedError. After a
// CollectiveAbortedError its text is kept; after another error the text is
// "collective aborted: an earlier collective failed: <its message>".
//
// Abort fails the collectives queued and not yet started; the running one
// cannot be interrupted from here (a ThreadGroup abort wakes a thread
// collective; MPI's watchdog ends the job).
//
// Destruction fails every collective still queued with
// CollectiveAbortedError ("<owner> was destroyed with this collective
// queued"), then waits for the running one to return before joining: the
// transport must make sure it does (ThreadGroup aborts itself before
// destroying its communicators; an MPI collective that never finishes is
// ended by the watchdog). Works outlive the queue: they hold their own
// state.
//
// The thread and the watchdog start with the first collective, so a
// communicator that never communicates costs no thread.

// ---------------------------------------------------------------------------
// HostWork

// Note [Errors across threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective fails on the progress thread and its error is thrown on the
// waiting thread(s). Rethrowing one stored exception object on several
// threads shares it: each reader's catch block reads it while its last
// owner (often the progress thread, dropping its queue entry) frees it, and
// the only order between the two is the exception's reference count inside
// libstdc++, which ThreadSanitizer cannot see. So the errors Tandem's
// transports throw, tandem::Error and CollectiveAbortedError (exactly those
// types), are kept as their type and message, and each Wait throws a fresh
// object of that type on its own thread. Any other exception is kept as an
// exception_ptr and rethrown as it is (its type kept too).

// A CPU timing event that waits for its work as a device event waits for its
// lane: the progress thread records the clock, and readers see it only
// after the work has finished (which also orders the two threads).
class HostWork::Event final : public LaneEvent {
 public:
  explicit Event(const HostWork* work)
      : work_(work), clock_(GetBackend(Device::Cpu()).NewEvent(/*timing=*/true)) {}

  bool Query() const override { return work_->IsCompleted(); }
  void Synchronize() const override { work_->WaitFinished(); }
  double ElapsedMsSince(const LaneEvent& start) const override {
    Synchronize();
    if (const auto* host = dynamic_cast<const Event*>(&start)) {
      host->Synchronize();
      return clock_->ElapsedMsSince(*host->clock_);
    }
    return clock_->ElapsedMsSince(start);
  }
  void Record() { GetBackend(Device::Cpu()).Record(*clock_, MainLane(Device::Cpu())); }

 private:
  const HostWork* work_;
  std::unique_ptr<LaneEvent> clock_;
};

HostWork::HostWork(bool timed) {
  if (timed) {
    started_ = std::make_unique<Event>(this);
    finished_ = std::make_unique<Event>(this);
  }
}

void HostWork::Wait() {
  WaitFinished();
  // Written once, before done_, under the mutex WaitFinished took. See
  // Note [Errors across threads].
  switch (thrown_) {
    case Thrown::kNothing:
      return;
    case Thrown::kError:
      throw Error(message_);
    case Thrown::kAborted:
      throw CollectiveAbortedError(message_);
    case Thrown::kOther:
      std::rethrow_exception(error_);
  }
}

void HostWork::WaitOn(const Lane&) { Wait(); }

bool HostWork::IsCompleted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void HostWork::WaitFinished() const {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_cv_.wait(lock, [this] { return done_; });
}

void HostWork::MarkStarted() {
  if (started_) static_cast<Event&>(*started_).Record();
}

void HostWork::Finish(std::exception_ptr error) {
  if (finished_) static_cast<Event&>(*finished_).Record();
  // See Note [Errors across threads]: read here, on the thread that threw.
  Thrown thrown = error ? Thrown::kOther : Thrown::kNothing;
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      if (typeid(e) == typeid(Error) || typeid(e) == typeid(CollectiveAbortedError)) {
        thrown = typeid(e) == typeid(Error) ? Thrown::kError : Thrown::kAborted;
        message = e.what();
        error = nullptr;
      }
    } catch (...) {
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    thrown_ = thrown;
    message_ = std::move(message);
    error_ = std::move(error);
    done_ = true;
  }
  finished_cv_.notify_all();
}

// ---------------------------------------------------------------------------
// CollectiveQueue

namespace {

// Fails `work` without running it.
void Fail(HostWork& work, const std::string& text) {
  work.MarkStarted();
  work.Finish(std::make_exception_ptr(CollectiveAbortedError(text)));
}

// The abort text a failed collective leaves behind; see Note [Collective
// queue].
std::string AbortTextAfter(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveAbortedError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("collective aborted: an earlier collective failed: ") + e.what();
  } catch (...) {
    return "collective aborted: an earlier collective failed with a non-standard exception";
  }
}

}  // namespace

CollectiveQueue::CollectiveQueue(CollectiveQueueOptions options)
    : options_(std::move(options)), timeout_(options_.timeout) {
  TANDEM_CHECK(options_.run != nullptr) << options_.owner << ": a CollectiveQueue needs a run "
                                        << "function (the transport's exchange)";
}

CollectiveQueue::~CollectiveQueue() {
  // See Note [Collective queue]. Nothing here may throw: a failure to fail
  // a queued Work (out of memory) leaves it unfinished rather than ending
  // the program.
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    const std::string text = "collective aborted: " + options_.owner +
                             " was destroyed with this collective queued";
    for (Item& item : items_) Fail(*item.work, text);
    items_.clear();
  } catch (...) {
  }
  queued_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveQueue::StartLocked() {
  if (thread_.joinable()) return;
  if (options_.on_timeout) {
    const std::string owner = options_.owner;
    watchdog_ = std::make_unique<CollectiveWatchdog>(
        timeout_,
        // Run hands the watchdog a collective's size in bytes (whatever its
        // dtype) where the watchdog says count.
        [owner](const char* kind, uint64_t sequence, int64_t bytes) {
          return owner + ": " + kind + " #" + std::to_string(sequence) + " (" +
                 std::to_string(bytes) + " bytes)";
        },
        options_.on_timeout);
  }
  thread_ = std::thread([this] { Loop(); });
}

std::shared_ptr<Work> CollectiveQueue::Enqueue(const Collective& c) {
  auto work = std::make_shared<HostWork>(c.options.timed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!abort_text_.empty()) {
      Fail(*work, abort_text_);
      return work;
    }
    StartLocked();
    items_.push_back({c, work});
  }
  queued_cv_.notify_one();
  return work;
}

void CollectiveQueue::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abort_text_.empty()) abort_text_ = "collective aborted: " + reason;
  FailQueuedLocked();
}

bool CollectiveQueue::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !abort_text_.empty();
}

void CollectiveQueue::set_timeout(std::chrono::steady_clock::duration timeout) {
  TANDEM_CHECK(options_.on_timeout != nullptr)
      << options_.owner << ": this transport's collectives have no watchdog to time";
  TANDEM_CHECK(timeout.count() > 0) << options_.owner << ": collective timeout must be positive";
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
  if (watchdog_) watchdog_->set_timeout(timeout);
}

void CollectiveQueue::FailQueuedLocked() {
  for (Item& item : items_) Fail(*item.work, abort_text_);
  items_.clear();
}

void CollectiveQueue::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_cv_.wait(lock, [this] { return stopping_ || !items_.empty(); });
    if (items_.empty()) return;  // stopping, and the destructor failed the rest
    Item item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    Run(item);
    lock.lock();
  }
}

void CollectiveQueue::Run(Item& item) {
  const Collective& c = item.collective;
  std::exception_ptr error;
  item.work->MarkStarted();
  {
    // watchdog_ is set before the thread starts and kept until it is joined.
    std::optional<CollectiveWatchdog::Watch> watch;
    if (watchdog_) watch.emplace(watchdog_->Start(ToString(c.kind), c.sequence, c.bytes()));
    try {
      options_.run(c);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) {
    item.work->Finish(nullptr);
    return;
  }
  // See Note [Collective queue]: a failure aborts what is queued behind it.
  // The failed Work finishes first, so Works still complete in queue order;
  // anything its waiter queues meanwhile is failed below with the rest.
  const std::string text = AbortTextAfter(error);
  item.work->Finish(std::move(error));
  std::lock_guard<std::mutex> lock(mutex_);
  if (abort_text_.empty()) abort_text_ = text;
  FailQueuedLocked();
}

}  // namespace tandem
