// ThreadCommunicator: N ranks as N threads of one process, exchanging data
// through shared memory. A ThreadGroup holds what the ranks share and hands
// each rank its communicator; the group must outlive the threads using it.
//
//   ThreadGroup group(4);
//   std::vector<std::thread> threads;
//   for (int r = 0; r < 4; ++r) {
//     threads.emplace_back([&group, r] {
//       Communicator& comm = group.communicator(r);
//       std::vector<float> grads(1000, float(r));
//       auto work = comm.AllReduce(grads.data(), grads.size(), ReduceOp::kSum);
//       ...                       // runs while the exchange goes on
//       work->Wait();             // every element is now 0+1+2+3
//     });
//   }
//   for (auto& t : threads) t.join();
//
// Each rank's collectives run in order on its communicator's progress thread
// (parallel/collective_queue.h), so a collective's call returns at once and
// the exchange completes once every rank has issued it. Sums (AllReduce,
// ReduceScatter) are done in float32 in rank order 0..N-1, whatever the
// number of threads summing (bfloat16 sums are rounded to bfloat16 once, at
// the end), so results are the same bits on every rank and in every run.
// If one rank gives up (Abort, or the launcher aborts the group because
// a worker threw), every collective waiting, queued or issued later fails
// with CollectiveAbortedError instead of hanging; a collective that waits
// longer than timeout() for the other ranks fails with an error naming them,
// and aborts the rest.
#ifndef TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_
#define TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cpu/cpu_thread_pool.h"
#include "parallel/collective_queue.h"
#include "parallel/communicator.h"

namespace tandem {

class ThreadGroup;

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(const ThreadCommunicator&) = delete;
  ThreadCommunicator& operator=(const ThreadCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override;
  std::string Describe() const override;
  // Aborts the whole group; see ThreadGroup::Abort.
  void Abort(const std::string& reason) override;

 protected:
  // Queues `c` on this rank's progress thread; see Note [Two barriers].
  std::shared_ptr<Work> Start(const Collective& c) override;

 private:
  friend class ThreadGroup;
  ThreadCommunicator(ThreadGroup* group, int rank);

  // The exchange, on the progress thread.
  void Run(const Collective& c);
  void RunAllReduce(const Collective& c);
  void RunBroadcast(const Collective& c);
  void RunAllGather(const Collective& c);
  void RunReduceScatter(const Collective& c);
  // Elements [begin, end) of `inputs` (one per rank, in rank order), summed
  // for `c` on the group's data threads, into every one of `outputs`.
  void Reduce(const Collective& c, const std::vector<const void*>& inputs,
              const std::vector<void*>& outputs, int64_t begin, int64_t end);

  ThreadGroup* group_;
  int rank_;
  // Last member: its thread, which calls Run, stops before the rest goes.
  CollectiveQueue queue_;
};

class ThreadGroup {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300 * 1000};

  // Shared state for `size` ranks (size >= 1). Each rank sums its part of
  // an all-reduce on up to `data_threads` threads (Note [Summing on several
  // threads]); the launcher gives CPU workers their intra-op thread count.
  explicit ThreadGroup(int size, int data_threads = 1);
  // Aborts the group ("the ThreadGroup was destroyed"), so that no progress
  // thread waits for a rank that will never come, then destroys the
  // communicators (each fails what it still has queued; see Note
  // [Collective queue] in collective_queue.cc).
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int size() const { return size_; }
  // Rank `rank`'s communicator, owned by the group. Give each to one thread.
  ThreadCommunicator& communicator(int rank);

  // How long a rank's collective waits for the others before it fails.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;

  // Makes every collective of every rank, waiting now, queued or issued
  // later, fail with CollectiveAbortedError("collective aborted: <reason>").
  // Callable from any thread, any number of times; the first reason is kept.
  void Abort(const std::string& reason);
  bool aborted() const;

 private:
  friend class ThreadCommunicator;

  // First barrier of a collective, on `rank`'s progress thread: publishes
  // `c` for `rank`, checks that all ranks called the same collective, then
  // returns once every rank has arrived. Throws if the group is (or
  // becomes) aborted first, or on timeout. See Note [Abort protocol].
  void Gather(int rank, const Collective& c);
  // Second barrier: returns once every rank has finished reading the
  // others' buffers. It cannot be interrupted (see Note [Two barriers]).
  void Release(int rank);
  // What `rank` published in the current collective; valid between Gather
  // and Release.
  const Collective& published(int rank) const { return published_[rank]; }

  // Under mu_: the first reason wins; wakes every waiter.
  void AbortLocked(const std::string& reason);
  // Under mu_: "" when all published collectives agree, else what differs.
  std::string MismatchLocked() const;
  // Under mu_: the error of `c` on `rank` timing out in generation
  // `generation`, naming the ranks that did not arrive.
  std::string TimeoutMessageLocked(int rank, const Collective& c, uint64_t generation) const;

  const int size_;
  const int data_threads_;
  // The helpers of every rank's data phase; outlives the progress threads.
  cpu::ThreadPool data_pool_;
  // Destroyed explicitly in ~ThreadGroup, before the state below that their
  // progress threads use.
  std::vector<std::unique_ptr<ThreadCommunicator>> communicators_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Sense-reversing barrier: the last rank to arrive resets `arrived_` and
  // bumps `generation_`; waiters wait for the generation to change, so the
  // barrier is reusable without a second phase.
  int arrived_ = 0;
  uint64_t generation_ = 0;
  // The generation each rank last arrived in; names the missing ranks when
  // a wait times out.
  std::vector<uint64_t> arrived_in_;
  // What each rank is doing in the current collective: published while it
  // waits in Gather, read by every rank until Release. See Note [Two
  // barriers].
  std::vector<Collective> published_;
  bool aborted_ = false;
  std::string abort_reason_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_
