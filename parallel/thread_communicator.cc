#include "parallel/thread_communicator.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace tandem {

// Note [Two barriers]
// A collective is: publish my buffer pointers, wait until every rank has
// (Gather); read or write the other ranks' buffers (the data phase); wait
// until every rank has finished (Release). Without the second barrier a
// fast rank could return and reuse or free its buffer, or publish its next
// collective over the pointers a slow rank is still reading.
//
// The data phase never blocks and never throws, so once Gather has
// succeeded on one rank it succeeds on all of them (the generation only
// moves when all have arrived) and every rank reaches Release promptly.
// That is why Release ignores aborts and timeouts: returning early from it
// would let a rank's caller free a buffer another rank is still reading.
//
// Note [Fixed reduction order]
// AllReduce splits [0, count) into size() contiguous chunks, chunk r being
// [r*count/N, (r+1)*count/N); counts need not divide by N, so chunks differ
// by at most one element and may be empty. Rank r alone reads chunk r of
// every rank's buffer, sums it as ((x0 + x1) + x2) + ... in rank order,
// multiplies by 1.0f/N for kAverage (sum first, then one rounding for the
// scale), and writes the result into chunk r of every rank's buffer. No two
// ranks touch the same element, so no scratch buffer is needed: it is a
// reduce-scatter and an all-gather in one pass over shared memory. Because
// the order of the additions is fixed, the result is the same bits on every
// rank and in every run, whatever the thread scheduling.
//
// Note [Abort protocol]
// All barrier state sits under one mutex, so "the generation moved" and "the
// group was aborted" are decided atomically: either every rank of a Gather
// sees the generation move (all proceed; the collective completes) or it
// never moves (all throw). A rank entering Gather of an aborted group throws
// at once; one already waiting is woken by AbortLocked's notify_all and
// throws CollectiveAbortedError("collective aborted: <reason>"). A waiter
// that times out aborts the group with its own message before throwing it,
// so the other ranks do not each wait out their own timeout. The group
// stays aborted: the barrier counters are inconsistent after a rank left a
// Gather early, and a half-finished step cannot be resumed anyway.

namespace {

// Elements summed per block: small enough for a stack buffer that stays in
// L1, large enough that the loops vectorise.
constexpr int64_t kBlock = 1024;

std::string Bytes(int64_t count) {
  return std::to_string(count * static_cast<int64_t>(sizeof(float))) + " bytes";
}

}  // namespace

// ---------------------------------------------------------------------------
// ThreadGroup

ThreadGroup::ThreadGroup(int size)
    : size_(size),
      arrived_in_(std::max(size, 0), ~uint64_t{0}),
      ops_(std::max(size, 0)) {
  TANDEM_CHECK(size >= 1) << "a thread group needs at least 1 rank, got "
                          << size;
  for (int r = 0; r < size; ++r) {
    communicators_.emplace_back(new ThreadCommunicator(this, r));
  }
}

ThreadGroup::~ThreadGroup() = default;

ThreadCommunicator& ThreadGroup::communicator(int rank) {
  TANDEM_CHECK(rank >= 0 && rank < size_)
      << "rank " << rank << " is outside a thread group of " << size_;
  return *communicators_[rank];
}

void ThreadGroup::set_timeout(std::chrono::milliseconds timeout) {
  TANDEM_CHECK(timeout.count() > 0)
      << "collective timeout must be positive, got " << timeout.count()
      << " ms";
  std::lock_guard<std::mutex> lock(mu_);
  timeout_ = timeout;
}

std::chrono::milliseconds ThreadGroup::timeout() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeout_;
}

void ThreadGroup::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  AbortLocked(reason);
}

bool ThreadGroup::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void ThreadGroup::AbortLocked(const std::string& reason) {
  if (!aborted_) {
    aborted_ = true;
    abort_reason_ = reason;
  }
  cv_.notify_all();
}

const char* ThreadGroup::KindName(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
      return "AllReduce";
    case Kind::kBroadcast:
      return "Broadcast";
    case Kind::kBarrier:
      return "Barrier";
    case Kind::kAllGather:
      return "AllGather";
  }
  return "?";
}

// "AllReduce #3 (4000 bytes, sum)", "Broadcast #4 (40 bytes, root 1)".
std::string ThreadGroup::OpName(const Op& op) {
  std::ostringstream out;
  out << KindName(op.kind) << " #" << op.sequence << " (" << Bytes(op.count);
  if (op.kind == Kind::kAllReduce) out << ", " << ToString(op.reduce);
  if (op.kind == Kind::kBroadcast) out << ", root " << op.root;
  out << ")";
  return out.str();
}

std::string ThreadGroup::MismatchLocked() const {
  const Op& first = ops_[0];
  for (int r = 1; r < size_; ++r) {
    const Op& other = ops_[r];
    bool same = other.kind == first.kind && other.sequence == first.sequence &&
                other.count == first.count;
    if (first.kind == Kind::kBroadcast) same = same && other.root == first.root;
    if (first.kind == Kind::kAllReduce) {
      same = same && other.reduce == first.reduce;
    }
    if (!same) {
      return "ranks called different collectives: rank 0 called " +
             OpName(first) + " but rank " + std::to_string(r) + " called " +
             OpName(other) +
             "; every rank must call the same collectives in the same order";
    }
  }
  return "";
}

void ThreadGroup::Gather(int rank, const Op& op) {
  // See Note [Abort protocol].
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_)
    throw CollectiveAbortedError("collective aborted: " + abort_reason_);
  ops_[rank] = op;
  arrived_in_[rank] = generation_;
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    std::string mismatch = MismatchLocked();
    if (!mismatch.empty()) {
      AbortLocked(mismatch);
      throw Error(mismatch);
    }
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    // Generation first: a completed barrier wins over a later abort, so all
    // ranks agree on whether this collective happened.
    if (generation_ != generation) return;
    if (aborted_) {
      throw CollectiveAbortedError("collective aborted: " + abort_reason_);
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        generation_ == generation && !aborted_) {
      std::ostringstream message;
      message << OpName(op) << " on ThreadCommunicator rank " << rank << " of "
              << size_ << " timed out after " << timeout_.count()
              << " ms waiting for rank(s)";
      for (int r = 0; r < size_; ++r) {
        if (arrived_in_[r] != generation) message << " " << r;
      }
      message << "; every rank must call the same collectives in the same "
                 "order (ThreadGroup::set_timeout changes the limit)";
      AbortLocked(message.str());
      throw Error(message.str());
    }
  }
}

void ThreadGroup::Release(int rank) {
  // Deliberately deaf to aborts and timeouts; see Note [Two barriers].
  std::unique_lock<std::mutex> lock(mu_);
  arrived_in_[rank] = generation_;
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation; });
}

// ---------------------------------------------------------------------------
// ThreadCommunicator

int ThreadCommunicator::size() const { return group_->size(); }

std::string ThreadCommunicator::Describe() const {
  return "ThreadCommunicator(rank " + std::to_string(rank_) + " of " +
         std::to_string(size()) + ")";
}

void ThreadCommunicator::Abort(const std::string& reason) {
  group_->Abort(reason);
}

void ThreadCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  TANDEM_CHECK(count >= 0) << Describe() << ": AllReduce of " << count
                           << " elements";
  ThreadGroup::Op mine;
  mine.kind = ThreadGroup::Kind::kAllReduce;
  mine.sequence = ++sequence_;
  mine.count = count;
  mine.reduce = op;
  mine.send = data;
  mine.recv = data;
  group_->Gather(rank_, mine);

  // See Note [Fixed reduction order].
  const int n = size();
  const int64_t begin = count * rank_ / n;
  const int64_t end = count * (rank_ + 1) / n;
  const float scale = op == ReduceOp::kAverage ? 1.0f / n : 1.0f;
  float sum[kBlock];
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t len = std::min(kBlock, end - start);
    const float* first = group_->op(0).send + start;
    std::copy(first, first + len, sum);
    for (int r = 1; r < n; ++r) {
      const float* x = group_->op(r).send + start;
      for (int64_t i = 0; i < len; ++i) sum[i] += x[i];
    }
    if (op == ReduceOp::kAverage) {
      for (int64_t i = 0; i < len; ++i) sum[i] *= scale;
    }
    for (int r = 0; r < n; ++r) {
      std::memcpy(group_->op(r).recv + start, sum, len * sizeof(float));
    }
  }

  group_->Release(rank_);
}

void ThreadCommunicator::Broadcast(float* data, int64_t count, int root) {
  TANDEM_CHECK(count >= 0) << Describe() << ": Broadcast of " << count
                           << " elements";
  TANDEM_CHECK(root >= 0 && root < size())
      << Describe() << ": Broadcast root " << root << " is not a rank";
  ThreadGroup::Op mine;
  mine.kind = ThreadGroup::Kind::kBroadcast;
  mine.sequence = ++sequence_;
  mine.count = count;
  mine.root = root;
  mine.send = data;
  mine.recv = data;
  group_->Gather(rank_, mine);
  if (rank_ != root && count > 0) {
    std::memcpy(data, group_->op(root).send, count * sizeof(float));
  }
  group_->Release(rank_);
}

void ThreadCommunicator::Barrier() {
  ThreadGroup::Op mine;
  mine.kind = ThreadGroup::Kind::kBarrier;
  mine.sequence = ++sequence_;
  // No buffers, so no data phase and no Release.
  group_->Gather(rank_, mine);
}

void ThreadCommunicator::AllGather(const float* send, int64_t count_per_rank,
                                   float* recv) {
  TANDEM_CHECK(count_per_rank >= 0)
      << Describe() << ": AllGather of " << count_per_rank << " elements";
  ThreadGroup::Op mine;
  mine.kind = ThreadGroup::Kind::kAllGather;
  mine.sequence = ++sequence_;
  mine.count = count_per_rank;
  mine.send = send;
  mine.recv = recv;
  group_->Gather(rank_, mine);
  if (count_per_rank > 0) {
    for (int r = 0; r < size(); ++r) {
      const float* from = group_->op(r).send;
      float* to = recv + r * count_per_rank;
      // In place, this rank's block is already where it belongs.
      if (from != to) std::memcpy(to, from, count_per_rank * sizeof(float));
    }
  }
  group_->Release(rank_);
}

}  // namespace tandem
