// A watchdog for collectives that cannot interrupt themselves (MPI): each
// collective is watched while it runs; one that has not finished after the
// timeout triggers `on_timeout` (for MPI: a message naming the collective,
// its sequence number and size, then MPI_Abort), so a rank that died or
// skipped a collective ends the job instead of hanging it.
//
//   CollectiveWatchdog dog(std::chrono::seconds(60), [](const std::string& what) {
//     std::cerr << what << "\n";
//     MPI_Abort(MPI_COMM_WORLD, 1);
//   });
//   { auto watch = dog.Watch("AllReduce #7 (4096 bytes)"); MPI_Allreduce(...); }
#ifndef TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_
#define TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem {

class CollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // on_timeout receives "<description> did not finish within N s"; it runs
  // on the watchdog's thread and is expected not to return (abort).
  CollectiveWatchdog(Clock::duration timeout,
                     std::function<void(const std::string&)> on_timeout);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  void set_timeout(Clock::duration timeout);
  Clock::duration timeout() const;

  // Watches one collective until the returned guard is destroyed. One at a
  // time: calls on one communicator do not overlap.
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
  Watch Start(std::string description);

 private:
  void Done();
  void Loop();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  Clock::duration timeout_;
  std::function<void(const std::string&)> on_timeout_;
  bool active_ = false;
  bool stopping_ = false;
  std::string description_;
  Clock::time_point started_;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COLLECTIVE_WATCHDOG_H_
