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
//       comm.AllReduce(grads.data(), grads.size(), ReduceOp::kSum);  // 0+1+2+3
//     });
//   }
//   for (auto& t : threads) t.join();
//
// Sums are done in rank order 0..N-1, so results are the same bits on every
// rank and in every run. If one rank gives up (Abort, or the launcher aborts
// the group because a worker threw), every collective waiting or started
// later throws CollectiveAbortedError instead of hanging; a collective that
// waits longer than timeout() throws an error naming it, and aborts the rest.
#ifndef TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_
#define TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tandem {

class ThreadGroup;

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(const ThreadCommunicator&) = delete;
  ThreadCommunicator& operator=(const ThreadCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override;
  void AllReduce(float* data, int64_t count, ReduceOp op) override;
  void Broadcast(float* data, int64_t count, int root) override;
  void Barrier() override;
  void AllGather(const float* send, int64_t count_per_rank,
                 float* recv) override;
  std::string Describe() const override;
  // Aborts the whole group; see ThreadGroup::Abort.
  void Abort(const std::string& reason) override;

  // How many collectives this rank has started; error messages number them
  // from 1 ("AllReduce #3").
  uint64_t sequence() const { return sequence_; }

 private:
  friend class ThreadGroup;
  ThreadCommunicator(ThreadGroup* group, int rank)
      : group_(group), rank_(rank) {}

  ThreadGroup* group_;
  int rank_;
  // Only this rank's thread touches it: calls on one communicator are
  // serialised (see communicator.h).
  uint64_t sequence_ = 0;
};

class ThreadGroup {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300 * 1000};

  // Shared state for `size` ranks (size >= 1).
  explicit ThreadGroup(int size);
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int size() const { return size_; }
  // Rank `rank`'s communicator, owned by the group. Give each to one thread.
  ThreadCommunicator& communicator(int rank);

  // How long a rank waits in a collective for the others before it throws.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;

  // Makes every collective of every rank, waiting now or started later,
  // throw CollectiveAbortedError("collective aborted: <reason>"). Callable
  // from any thread, any number of times; the first reason is kept.
  void Abort(const std::string& reason);
  bool aborted() const;

 private:
  friend class ThreadCommunicator;

  enum class Kind { kAllReduce, kBroadcast, kBarrier, kAllGather };
  static const char* KindName(Kind kind);

  // What a rank is doing in the current collective. Published in the group
  // while the rank waits in the first barrier; read by every rank until the
  // second. See Note [Two barriers].
  struct Op {
    Kind kind = Kind::kBarrier;
    uint64_t sequence = 0;
    int64_t count = 0;
    int root = -1;                     // Broadcast
    ReduceOp reduce = ReduceOp::kSum;  // AllReduce
    const float* send = nullptr;
    float* recv = nullptr;
  };

  // First barrier of a collective: publishes `op` for `rank`, checks that
  // all ranks called the same collective, then returns once every rank has
  // arrived. Throws if the group is (or becomes) aborted first, or on
  // timeout. See Note [Abort protocol].
  void Gather(int rank, const Op& op);
  // Second barrier: returns once every rank has finished reading the
  // others' buffers. It cannot be interrupted (see Note [Two barriers]).
  void Release(int rank);
  const Op& op(int rank) const { return ops_[rank]; }

  // "AllReduce #3 (4000 bytes, sum)": how errors name a collective.
  static std::string OpName(const Op& op);
  // Under mu_: the first reason wins; wakes every waiter.
  void AbortLocked(const std::string& reason);
  // Under mu_: "" when all published ops agree, else what differs.
  std::string MismatchLocked() const;

  const int size_;
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
  std::vector<Op> ops_;
  bool aborted_ = false;
  std::string abort_reason_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_THREAD_COMMUNICATOR_H_
