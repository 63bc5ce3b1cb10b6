#include "parallel/collective_watchdog.h"

#include <algorithm>

namespace tandem {

CollectiveWatchdog::CollectiveWatchdog(Clock::duration timeout, DescribeFn describe,
                                       std::function<void(const std::string&)> on_timeout)
    : timeout_(timeout), describe_(std::move(describe)), on_timeout_(std::move(on_timeout)) {
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    timeout_ = timeout;
  }
  cv_.notify_all();  // the poll interval follows the timeout
}

CollectiveWatchdog::Clock::duration CollectiveWatchdog::timeout() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_;
}

CollectiveWatchdog::Watch CollectiveWatchdog::Start(const char* kind, uint64_t sequence,
                                                    int64_t count) {
  // See Note [Watchdog cost]: no notify, no formatting.
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = true;
  kind_ = kind;
  sequence_ = sequence;
  count_ = count;
  started_ = Clock::now();
  return Watch(this);
}

void CollectiveWatchdog::Done() {
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = false;
}

CollectiveWatchdog::Clock::duration CollectiveWatchdog::PollInterval() const {
  const Clock::duration eighth = timeout_ / 8;
  return std::clamp<Clock::duration>(eighth, std::chrono::milliseconds(1),
                                     std::chrono::milliseconds(250));
}

void CollectiveWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    cv_.wait_for(lock, PollInterval(), [this] { return stopping_; });
    if (stopping_ || !active_ || Clock::now() - started_ < timeout_) continue;
    const double seconds = std::chrono::duration<double>(timeout_).count();
    const std::string message =
        describe_(kind_, sequence_, count_) + " did not finish within " +
        std::to_string(seconds) + " s (a rank died, hangs, or skipped this collective)";
    active_ = false;  // report each stuck collective once
    lock.unlock();
    on_timeout_(message);
    lock.lock();
  }
}

}  // namespace tandem
