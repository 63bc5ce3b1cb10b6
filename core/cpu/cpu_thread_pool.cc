#include "core/cpu/cpu_thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#include <immintrin.h>

namespace tandem {
namespace cpu {

// One ParallelFor call. Tasks are claimed by an atomic counter; `finished`
// counts those done, and the caller sleeps on `done` until it reaches
// `tasks`. `helpers_wanted` bounds how many helpers join the job.
struct ThreadPool::Job {
  const std::function<void(int64_t)>* fn;
  int64_t tasks;
  std::atomic<int64_t> next{0};
  std::atomic<int> helpers_wanted{0};
  std::mutex mu;
  std::condition_variable done;
  std::atomic<int64_t> finished{0};  // written under mu
  std::exception_ptr error;          // guarded by mu
};

// Note [Spin before sleeping]
// An op's loop is often over in tens of microseconds, and the next one
// follows as soon. A helper that slept on the condition variable between
// them would be woken through the kernel for every op (a futex, and on a
// virtual machine an interrupt into the guest). So a helper whose queue is
// empty, and a caller whose job's last tasks run on helpers, first watch an
// atomic for up to kSpin, pausing between looks, and only then sleep.
// Notifying a condition variable nobody sleeps on makes no system call. The
// cost: a helper holds its core for up to kSpin after each op.
namespace {

constexpr std::chrono::microseconds kSpin{50};

// Looks at `ready` until it holds or kSpin has passed; whether it holds.
template <typename Ready>
bool SpinFor(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

int ThreadPool::helpers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(helpers_.size());
}

// Note [Helpers for every caller]
// Several callers may be in ParallelFor at once (the workers of threads
// mode share one pool), each wanting its own `threads - 1` helpers. The pool
// keeps at least as many helpers as the calls in flight want together, so
// that 2 workers of 4 threads run on 8 threads, not on 2 callers sharing the
// 3 helpers one call wants. Helpers sleep when no job is queued (Note [Spin
// before sleeping]), and none is ever stopped before the pool is destroyed.
void ThreadPool::Want(int helpers) {  // requires mu_
  StartHelpersLocked(wanted_ + helpers);
  wanted_ += helpers;  // after the threads, in case one cannot start
}

void ThreadPool::Reserve(int helpers) {
  std::lock_guard<std::mutex> lock(mu_);
  StartHelpersLocked(helpers);
}

void ThreadPool::StartHelpersLocked(int total) {
  while (static_cast<int>(helpers_.size()) < total) {
    helpers_.emplace_back([this] { HelperLoop(); });
  }
}

void ThreadPool::RunTasks(Job& job) {
  int64_t ran = 0;
  std::exception_ptr error;
  for (int64_t i = job.next.fetch_add(1); i < job.tasks; i = job.next.fetch_add(1)) {
    try {
      (*job.fn)(i);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++ran;
  }
  if (ran == 0) return;
  std::lock_guard<std::mutex> lock(job.mu);
  if (error && !job.error) job.error = error;
  // Release: the caller that sees the count sees the error and the outputs.
  if (job.finished.fetch_add(ran, std::memory_order_acq_rel) + ran == job.tasks) {
    job.done.notify_all();
  }
}

void ThreadPool::QueueChangedLocked() {
  queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
}

void ThreadPool::HelperLoop() {
  for (;;) {
    SpinFor([this] {
      return queued_.load(std::memory_order_acquire) > 0 || stopping_.load();
    });
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      // The last helper a job wants takes it off the queue.
      if (job->helpers_wanted.fetch_sub(1) <= 1) {
        queue_.pop_front();
        QueueChangedLocked();
      }
    }
    RunTasks(*job);
  }
}

void ThreadPool::ParallelFor(int64_t tasks, int threads,
                             const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  const int helpers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), tasks)) - 1;
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->tasks = tasks;
  if (helpers > 0) {
    job->helpers_wanted.store(helpers);
    {
      std::lock_guard<std::mutex> lock(mu_);
      Want(helpers);
      queue_.push_back(job);
      QueueChangedLocked();
    }
    for (int i = 0; i < helpers; ++i) wake_.notify_one();
  }
  RunTasks(*job);
  // Helpers that have not picked the job up yet would find no task left;
  // take it off the queue so they do not wake for nothing.
  if (helpers > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
    QueueChangedLocked();
    wanted_ -= helpers;
  }
  // Seeing the count, the caller sees the error too (written before it).
  // A helper still inside RunTasks holds the job through its own pointer.
  const auto all_done = [&] { return job->finished.load(std::memory_order_acquire) == job->tasks; };
  if (!SpinFor(all_done)) {
    std::unique_lock<std::mutex> lock(job->mu);
    job->done.wait(lock, all_done);
  }
  if (job->error) std::rethrow_exception(job->error);
}

void IntraOp::ForRanges(int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t pieces = (n + grain - 1) / grain;
  auto piece = [&](int64_t p) { fn(p * grain, std::min(n, (p + 1) * grain)); };
  if (pieces == 1 || threads <= 1 || pool == nullptr) {
    for (int64_t p = 0; p < pieces; ++p) piece(p);
    return;
  }
  pool->ParallelFor(pieces, threads, piece);
}

}  // namespace cpu
}  // namespace tandem
