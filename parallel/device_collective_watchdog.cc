#include "parallel/device_collective_watchdog.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"

namespace tandem {

DeviceCollectiveWatchdog::DeviceCollectiveWatchdog(
    std::string owner, std::function<std::chrono::milliseconds()> timeout, Hooks hooks)
    : owner_(std::move(owner)), timeout_(std::move(timeout)), hooks_(std::move(hooks)) {
  TANDEM_CHECK(timeout_ && hooks_.abort) << owner_ << ": the watchdog needs a timeout and abort";
}

DeviceCollectiveWatchdog::~DeviceCollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeviceCollectiveWatchdog::Watch(std::string name, std::function<bool()> done) {
  const Clock::time_point now = Clock::now();
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fired_) return;
    if (pending_.empty()) {
      head_since_ = now;
      notify = true;
    }
    pending_.push_back({std::move(name), std::move(done), now});
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  }
  if (notify) wake_.notify_all();
}

bool DeviceCollectiveWatchdog::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void DeviceCollectiveWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (pending_.empty()) {
      // Idle: nothing queued, nothing to time.
      wake_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      continue;
    }
    const std::string why = Check(lock);
    if (!why.empty()) {
      fired_ = true;
      pending_.clear();
      lock.unlock();
      hooks_.abort(why);
      return;
    }
    wake_.wait_for(lock, kPoll, [this] { return stop_; });
  }
}

std::string DeviceCollectiveWatchdog::Check(std::unique_lock<std::mutex>& lock) {
  while (!pending_.empty()) {
    bool done = false;
    try {
      done = pending_.front().done();
    } catch (const std::exception& e) {
      return owner_ + ": " + pending_.front().name + " failed: " + e.what();
    }
    if (!done) break;
    pending_.pop_front();
    head_since_ = Clock::now();
  }
  if (hooks_.async_error) {
    // Without the lock: the transport may take its own locks.
    lock.unlock();
    std::string error;
    try {
      error = hooks_.async_error();
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty()) return owner_ + ": " + error + " (reported asynchronously)";
  }
  if (pending_.empty()) return "";
  const std::chrono::milliseconds timeout = timeout_();
  const Entry& head = pending_.front();
  const Clock::time_point since = std::max(head.queued, head_since_);
  if (Clock::now() - since <= timeout) return "";
  return Overdue(head, since, timeout);
}

std::string DeviceCollectiveWatchdog::Overdue(const Entry& head, Clock::time_point since,
                                              std::chrono::milliseconds timeout) const {
  const double waited = std::chrono::duration<double>(Clock::now() - since).count();
  const size_t behind = pending_.size() - 1;
  return owner_ + ": " + head.name + " did not complete within " +
         std::to_string(timeout.count()) + " ms on the device (waited " +
         std::to_string(static_cast<int64_t>(waited * 1000)) + " ms; " + std::to_string(behind) +
         " collective(s) queued behind it): a rank stalled, died or skipped it (every rank "
         "must issue the same collectives in the same order); raise --collective_timeout if "
         "a step can legitimately take longer";
}

}  // namespace tandem
