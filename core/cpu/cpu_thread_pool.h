// A pool of helper threads for the CPU backend's ops: ParallelFor runs
// fn(0) .. fn(tasks - 1), the calling thread and up to `threads - 1` helpers
// each taking the next task until none is left, and returns when all have
// run. Several threads (the workers of threads mode) may call it at once;
// the pool keeps enough helpers for all of them (up to `threads - 1` each),
// and a caller never waits for a helper to start: it runs tasks itself from
// the first, and all of them if no helper comes.
//
//   ThreadPool pool;
//   pool.ParallelFor(blocks, CpuThreads(), [&](int64_t b) { Compute(b); });
//
// Which thread runs a task is not fixed, so a task must give the same result
// on any thread: it writes only its own outputs, in an order of its own.
//
// IntraOp is what one op may use of a pool; its ForRanges splits n elements
// (or rows) into pieces fixed by n and a grain, never by the thread count:
//
//   intra.ForRanges(n, kGrain, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
//   });
#ifndef TANDEM_CORE_CPU_CPU_THREAD_POOL_H_
#define TANDEM_CORE_CPU_CPU_THREAD_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {
namespace cpu {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs fn(i) for every i in [0, tasks) on at most `threads` threads (the
  // caller included); starts helpers on first need. The first exception a
  // task throws is rethrown here, after every task has finished.
  void ParallelFor(int64_t tasks, int threads, const std::function<void(int64_t)>& fn);
  // Starts helpers now, up to `helpers` in all (throws here if a thread
  // cannot start), so that calls in flight that want no more together
  // never start one.
  void Reserve(int helpers);
  // Helper threads started so far.
  int helpers() const;

 private:
  struct Job;
  // Counts `helpers` more wanted by the calls in flight and starts helpers
  // up to that total. See Note [Helpers for every caller].
  void Want(int helpers);
  void StartHelpersLocked(int total);  // requires mu_
  void HelperLoop();
  void QueueChangedLocked();  // requires mu_: after queue_ changed
  static void RunTasks(Job& job);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs with tasks still unclaimed
  // queue_.size(), readable without mu_ (written under it): helpers watch
  // it, and stopping_, for a while before they sleep (Note [Spin before
  // sleeping]).
  std::atomic<int> queued_{0};
  std::vector<std::thread> helpers_;
  int wanted_ = 0;  // helpers the ParallelFor calls in flight want, summed
  std::atomic<bool> stopping_{false};  // written under mu_
};

// Elements per piece of an op's loop (128 KiB of floats): large enough
// that handing a piece to a helper costs little beside it, small enough that
// a layer's activations split across a few threads.
constexpr int64_t kPieceElements = int64_t{1} << 15;

// Whole rows of `cols` columns per piece: about kPieceElements, at least 1.
inline int64_t RowsPerPiece(int64_t cols) {
  return std::max<int64_t>(1, kPieceElements / std::max<int64_t>(cols, 1));
}

// The threads one op may use: the calling thread and up to `threads - 1`
// helpers of `pool` (none without a pool).
struct IntraOp {
  ThreadPool* pool = nullptr;
  int threads = 1;

  // Runs fn(begin, end) for the pieces [0, grain), [grain, 2 grain), ... of
  // [0, n), the last one shorter, in parallel where there are several
  // pieces and threads. The pieces do not depend on `threads`, so an op
  // whose pieces each compute in a fixed order gives the same bits on any
  // number of threads.
  void ForRanges(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) const;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_THREAD_POOL_H_
