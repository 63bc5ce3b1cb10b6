// A watchdog for collectives that cannot interrupt themselves (MPI): each
// collective is watched while it runs; one that has not finished after the
// timeout triggers `on_timeout` (for MPI: a message naming the collective,
// its sequence number and size, then MPI_Abort), so a rank that died or
// skipped a collective ends the job instead of hanging it. The host
// transports use it through their CollectiveQueue (parallel/
// collective_queue.h), which watches each collective its progress thread
// runs.
//
//   CollectiveWatchdog dog(
//       std::chrono::seconds(60),
//       [](const char* kind, uint64_t seq, int64_t count) {
//         return std::string(kind) + " #" + std::to_string(seq);
//       },
//       [](const std::string& what) {
//         std::cerr << what << "\n";
//         MPI_Abort(MPI_COMM_WORLD, 1);
//       });
//   { auto watch = dog.Start("AllReduce", 7, 1024); MPI_Allreduce(...); }
//
// Note [Watchdog cost]: Start and Done only write a few fields under an
// uncontended mutex; they neither wake the watchdog's thread nor format
// text. The thread instead wakes on its own every poll interval (an eighth
// of the timeout, at most 250 ms) and fires once the same collective has
// been running for the timeout. Waking it at every collective would add a
// thread switch to every small collective.
#ifndef TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_
#define TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem {

class CollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Names a collective for the timeout message; called only on a timeout.
  using DescribeFn =
      std::function<std::string(const char* kind, uint64_t sequence, int64_t count)>;

  // on_timeout receives "<description> did not finish within N s ..."; it
  // runs on the watchdog's thread and is expected not to return (abort).
  CollectiveWatchdog(Clock::duration timeout, DescribeFn describe,
                     std::function<void(const std::string&)> on_timeout);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  void set_timeout(Clock::duration timeout);
  Clock::duration timeout() const;

  // Watches one collective until the returned guard is destroyed. One at a
  // time: a communicator's progress thread runs one collective at a time. `kind` must outlive the
  // watch (a string literal).
  class Watch {
   public:
    explicit Watch(CollectiveWatchdog* dog) : dog_(dog) {}
    Watch(Watch&& other) noexcept : dog_(other.dog_) { other.dog_ = nullptr; }
    ~Watch() {
      if (dog_) dog_->Done();
    }

   private:
    CollectiveWatchdog* dog_;
  };
  Watch Start(const char* kind, uint64_t sequence, int64_t count);

 private:
  void Done();
  void Loop();
  Clock::duration PollInterval() const;  // requires mutex_

  mutable std::mutex mutex_;
  std::condition_variable cv_;  // only for stopping
  Clock::duration timeout_;
  DescribeFn describe_;
  std::function<void(const std::string&)> on_timeout_;
  bool active_ = false;
  bool stopping_ = false;
  const char* kind_ = "";
  uint64_t sequence_ = 0;
  int64_t count_ = 0;
  Clock::time_point started_;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_
