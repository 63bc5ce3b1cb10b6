#include "parallel/collective_watchdog.h"

namespace tandem {

CollectiveWatchdog::CollectiveWatchdog(Clock::duration timeout,
                                       std::function<void(const std::string&)> on_timeout)
    : timeout_(timeout), on_timeout_(std::move(on_timeout)) {
  thread_ = std::thread([this] { Loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::set_timeout(Clock::duration timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

CollectiveWatchdog::Clock::duration CollectiveWatchdog::timeout() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_;
}

CollectiveWatchdog::Watch CollectiveWatchdog::Start(std::string description) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_ = true;
    description_ = std::move(description);
    started_ = Clock::now();
  }
  cv_.notify_all();
  return Watch(this);
}

void CollectiveWatchdog::Done() {
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = false;
}

void CollectiveWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!active_) {
      cv_.wait(lock, [this] { return stopping_ || active_; });
      continue;
    }
    const Clock::time_point deadline = started_ + timeout_;
    const Clock::time_point watched = started_;
    if (cv_.wait_until(lock, deadline, [&] { return stopping_ || !active_ || started_ != watched; })) {
      continue;  // finished, replaced by the next collective, or stopping
    }
    const double seconds = std::chrono::duration<double>(timeout_).count();
    const std::string message =
        description_ + " did not finish within " + std::to_string(seconds) +
        " s (a rank died, hangs, or skipped this collective)";
    lock.unlock();
    on_timeout_(message);
    lock.lock();
    active_ = false;
  }
}

}  // namespace tandem
