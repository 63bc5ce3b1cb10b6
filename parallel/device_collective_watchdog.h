// A watchdog for collectives queued on a device (NCCL): the host returns as
// soon as a collective is queued, so nothing on the host is blocked in it
// when a peer stalls; the device waits instead, and with it everything
// queued behind. This watches each queued collective's completion, in queue
// order, from a thread of its own:
//
//   DeviceCollectiveWatchdog dog("NcclCommunicator(rank 0 of 2, cuda:0)",
//                                [&] { return state->timeout(); }, hooks);
//   dog.Watch("AllReduce #7 (4194304 bytes, sum, gradient bucket 3)",
//             [event] { return event->Query(); });
//
// A collective is overdue when it has not completed `timeout` after it
// reached the head of the queue (after it was queued and the one before it
// completed): collectives queued early behind a long backward pass are not
// charged for it. The first overdue collective, or an error the transport
// reports (Hooks::async_error), calls Hooks::abort once, on the watchdog's
// thread, with a message naming the communicator, the collective and how
// many were queued behind it; the watchdog then stops.
//
// See Note [Watchdog cost] in collective_watchdog.h for why it polls.
#ifndef TANDEM_PARALLEL_DEVICE_COLLECTIVE_WATCHDOG_H_
#define TANDEM_PARALLEL_DEVICE_COLLECTIVE_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem {

class DeviceCollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // An error the transport reports on its own (ncclCommGetAsyncError), ""
    // while none. Called at every poll. May be empty.
    std::function<std::string()> async_error;
    // Gives up: aborts the communicator and whatever waits on it.
    std::function<void(const std::string&)> abort;
  };

  // `timeout` is read at every poll, so a new limit applies at once.
  DeviceCollectiveWatchdog(std::string owner, std::function<std::chrono::milliseconds()> timeout,
                           Hooks hooks);
  // Stops the thread; collectives still queued are no longer watched.
  ~DeviceCollectiveWatchdog();
  DeviceCollectiveWatchdog(const DeviceCollectiveWatchdog&) = delete;
  DeviceCollectiveWatchdog& operator=(const DeviceCollectiveWatchdog&) = delete;

  // Watches one queued collective until done() is true (an exception from
  // done() counts as the transport's error). Call in queue order. Starts the
  // thread on first use.
  void Watch(std::string name, std::function<bool()> done);

  // Whether the watchdog has called abort.
  bool fired() const;
  // How long the watchdog sleeps between polls while collectives are queued.
  static constexpr std::chrono::milliseconds kPoll{10};

 private:
  struct Entry {
    std::string name;
    std::function<bool()> done;
    Clock::time_point queued;
  };
  void Loop();
  // Under mu_: drops the completed collectives at the head of the queue;
  // the reason to give up, or "".
  std::string Check(std::unique_lock<std::mutex>& lock);
  std::string Overdue(const Entry& head, Clock::time_point since,
                      std::chrono::milliseconds timeout) const;

  const std::string owner_;
  const std::function<std::chrono::milliseconds()> timeout_;
  const Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Entry> pending_;
  Clock::time_point head_since_;  // when pending_.front() reached the head
  bool stop_ = false;
  bool fired_ = false;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_DEVICE_COLLECTIVE_WATCHDOG_H_
