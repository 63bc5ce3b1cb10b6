#include "parallel/thread_communicator.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <sstream>
#include <utility>

namespace tandem {

// Note [Two barriers]
// A collective runs on each rank's progress thread (parallel/
// collective_queue.h) as: publish my Collective (its buffer pointers), wait
// until every rank has (Gather); read or write the other ranks' buffers
// (the data phase); wait until every rank has finished (Release); only then
// is the rank's Work completed. Without the second barrier a fast rank could
// complete its Work, letting its caller reuse or free the buffer, or publish
// its next collective over the pointers a slow rank is still reading.
//
// The data phase never waits for another rank and never throws (its
// summing threads start with the group), so once Gather has succeeded on
// one rank it succeeds on all of them (the generation only moves when all
// have arrived) and every rank reaches Release promptly.
// That is why Release ignores aborts and timeouts: returning early from it
// would let a rank's caller free a buffer another rank is still reading.

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
// bfloat16 elements are widened to float32 as they are read, summed (and
// scaled) in float32 exactly as above, and the result is rounded to
// bfloat16 once, to nearest even (core/dtype.h), as it is written: a
// bfloat16 all-reduce is the float32 all-reduce of the same values, rounded.
// Rounding after every addition instead would make the error grow with the
// number of ranks and depend on their order.
//
// ReduceScatter sums the same way: rank r alone reads block r of every
// rank's send and writes the result into its own recv, so each element is
// the bits AllReduce would leave in block r of the same buffers. In place,
// recv is rank r's own block r, which no other rank reads.
//
// Note [Summing on several threads]
// A rank's chunk of a large all-reduce is cut into pieces of kPieceElements
// (fixed by the count alone), which the rank's progress thread and up to
// data_threads - 1 helpers of the group's pool sum at once: with 2 workers
// of 4 intra-op threads, the gradient all-reduce that the end of backward
// waits for is summed on 8 threads instead of 2. Every element is still
// summed in rank order, so the bits do not depend on the pieces or the
// threads. The pool's helpers start with the group and sleep between
// collectives, and a progress thread whose helpers are all busy sums every
// piece itself.
//
// Note [Abort protocol]
// All barrier state sits under one mutex, so "the generation moved" and "the
// group was aborted" are decided atomically: either every rank of a Gather
// sees the generation move (all proceed; the collective completes) or it
// never moves (all throw). A rank entering Gather of an aborted group throws
// at once (so collectives still queued behind it fail at once too); one
// already waiting is woken by AbortLocked's notify_all and throws
// CollectiveAbortedError("collective aborted: <reason>"). Each throw fails
// that rank's Work, and Wait rethrows it on the rank's own thread. A waiter
// that times out aborts the group with its own message before throwing it,
// so the other ranks do not each wait out their own timeout. The group
// stays aborted: the barrier counters are inconsistent after a rank left a
// Gather early, and a half-finished step cannot be resumed anyway. The group
// also aborts itself when destroyed, so that no progress thread waits on.

namespace {

// Elements summed per block: small enough for a stack buffer that stays in
// L1, large enough that the loops vectorise.
constexpr int64_t kBlock = 1024;

// How elements of each dtype are read into float32 and written back.
inline float Widen(float x) { return x; }
inline float Widen(uint16_t bits) { return BFloat16BitsToFloat(bits); }
inline void Narrow(float x, float* out) { *out = x; }
inline void Narrow(float x, uint16_t* out) { *out = FloatToBFloat16Bits(x); }

// Elements [begin, end) of every input (inputs[r] is rank r's, of elements
// T) are summed in rank order, times `scale` when averaging, rounded once to
// T and written to the same elements of every output. Each block is read
// whole before it is written, so an output may be an input. See Note [Fixed
// reduction order].
template <typename T>
void ReduceChunk(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                 int64_t begin, int64_t end, bool average, float scale) {
  float sum[kBlock];
  T out[kBlock];
  for (int64_t start = begin; start < end; start += kBlock) {
    const int64_t len = std::min(kBlock, end - start);
    const T* first = static_cast<const T*>(inputs[0]) + start;
    for (int64_t i = 0; i < len; ++i) sum[i] = Widen(first[i]);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const T* x = static_cast<const T*>(inputs[r]) + start;
      for (int64_t i = 0; i < len; ++i) sum[i] += Widen(x[i]);
    }
    if (average) {
      for (int64_t i = 0; i < len; ++i) sum[i] *= scale;
    }
    for (int64_t i = 0; i < len; ++i) Narrow(sum[i], out + i);
    for (void* output : outputs) {
      std::memcpy(static_cast<T*>(output) + start, out, len * sizeof(T));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// ThreadGroup

ThreadGroup::ThreadGroup(int size, int data_threads)
    : size_(size),
      data_threads_(std::max(data_threads, 1)),
      arrived_in_(std::max(size, 0), ~uint64_t{0}),
      published_(std::max(size, 0)) {
  TANDEM_CHECK(size >= 1) << "a thread group needs at least 1 rank, got "
                          << size;
  // Every helper the ranks' data phases can want at once, started here: the
  // data phase itself must not throw (Note [Two barriers]).
  data_pool_.Reserve(size * (data_threads_ - 1));
  for (int r = 0; r < size; ++r) {
    communicators_.emplace_back(new ThreadCommunicator(this, r));
  }
}

ThreadGroup::~ThreadGroup() {
  Abort("the ThreadGroup was destroyed");
  communicators_.clear();  // joins the progress threads
}

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

std::string ThreadGroup::MismatchLocked() const {
  const Collective& first = published_[0];
  for (int r = 1; r < size_; ++r) {
    const Collective& other = published_[r];
    bool same = other.kind == first.kind && other.sequence == first.sequence &&
                other.count == first.count && other.dtype == first.dtype;
    if (first.kind == CollectiveKind::kBroadcast) same = same && other.root == first.root;
    if (first.kind == CollectiveKind::kAllReduce || first.kind == CollectiveKind::kReduceScatter) {
      same = same && other.op == first.op;
    }
    if (!same) {
      return "ranks called different collectives: rank 0 called " + first.Name() + " but rank " +
             std::to_string(r) + " called " + other.Name() +
             "; every rank must call the same collectives in the same order";
    }
  }
  return "";
}

std::string ThreadGroup::TimeoutMessageLocked(int rank, const Collective& c,
                                              uint64_t generation) const {
  std::ostringstream message;
  message << c.Name() << " on ThreadCommunicator rank " << rank << " of " << size_
          << " timed out after " << timeout_.count() << " ms waiting for rank(s)";
  for (int r = 0; r < size_; ++r) {
    if (arrived_in_[r] != generation) message << " " << r;
  }
  message << "; every rank must call the same collectives in the same "
             "order (ThreadGroup::set_timeout changes the limit)";
  return message.str();
}

void ThreadGroup::Gather(int rank, const Collective& c) {
  // See Note [Abort protocol].
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_)
    throw CollectiveAbortedError("collective aborted: " + abort_reason_);
  published_[rank] = c;
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
      const std::string message = TimeoutMessageLocked(rank, c, generation);
      AbortLocked(message);
      throw Error(message);
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

namespace {

CollectiveQueueOptions QueueOptions(const std::string& owner,
                                    std::function<void(const Collective&)> run) {
  CollectiveQueueOptions options;
  options.owner = owner;
  options.run = std::move(run);
  // No watchdog: a waiting rank wakes itself at the group's timeout, naming
  // the ranks that did not come (ThreadGroup::Gather).
  return options;
}

}  // namespace

ThreadCommunicator::ThreadCommunicator(ThreadGroup* group, int rank)
    : group_(group),
      rank_(rank),
      queue_(QueueOptions(Describe(), [this](const Collective& c) { Run(c); })) {}

int ThreadCommunicator::size() const { return group_->size(); }

std::string ThreadCommunicator::Describe() const {
  return "ThreadCommunicator(rank " + std::to_string(rank_) + " of " +
         std::to_string(size()) + ")";
}

void ThreadCommunicator::Abort(const std::string& reason) {
  group_->Abort(reason);
}

std::shared_ptr<Work> ThreadCommunicator::Start(const Collective& c) {
  TANDEM_CHECK(c.kind != CollectiveKind::kWindowRegister)
      << Context(c) << ": ThreadCommunicator has no collective '" << ToString(c.kind) << "'";
  return queue_.Enqueue(c);
}

void ThreadCommunicator::Run(const Collective& c) {
  group_->Gather(rank_, c);
  // A barrier has no buffers, so no data phase and no Release.
  switch (c.kind) {
    case CollectiveKind::kBarrier: return;
    case CollectiveKind::kAllReduce: RunAllReduce(c); break;
    case CollectiveKind::kBroadcast: RunBroadcast(c); break;
    case CollectiveKind::kAllGather: RunAllGather(c); break;
    case CollectiveKind::kReduceScatter: RunReduceScatter(c); break;
    case CollectiveKind::kWindowRegister: break;  // refused by Start
  }
  // Every rank gathered the same kind (MismatchLocked), so every rank gets
  // here and no rank can be left waiting in Release.
  group_->Release(rank_);
}

void ThreadCommunicator::RunAllReduce(const Collective& c) {
  // See Note [Fixed reduction order].
  const int n = size();
  std::vector<const void*> inputs(n);
  std::vector<void*> outputs(n);
  for (int r = 0; r < n; ++r) {
    outputs[r] = group_->published(r).data;
    inputs[r] = outputs[r];
  }
  Reduce(c, inputs, outputs, c.count * rank_ / n, c.count * (rank_ + 1) / n);
}

void ThreadCommunicator::RunReduceScatter(const Collective& c) {
  // See Note [Fixed reduction order]: block rank_ of every rank's send.
  std::vector<const void*> inputs(size());
  for (int r = 0; r < size(); ++r) {
    inputs[r] = static_cast<const char*>(group_->published(r).send) + rank_ * c.bytes();
  }
  Reduce(c, inputs, {c.data}, 0, c.count);
}

void ThreadCommunicator::Reduce(const Collective& c, const std::vector<const void*>& inputs,
                                const std::vector<void*>& outputs, int64_t begin,
                                int64_t end) {
  const bool average = c.op == ReduceOp::kAverage;
  const float scale = average ? 1.0f / size() : 1.0f;
  // See Note [Summing on several threads].
  const int64_t pieces = (end - begin + cpu::kPieceElements - 1) / cpu::kPieceElements;
  group_->data_pool_.ParallelFor(pieces, group_->data_threads_, [&](int64_t p) {
    const int64_t from = begin + p * cpu::kPieceElements;
    const int64_t to = std::min(end, from + cpu::kPieceElements);
    if (c.dtype == DType::kBFloat16) {
      ReduceChunk<uint16_t>(inputs, outputs, from, to, average, scale);
    } else {
      ReduceChunk<float>(inputs, outputs, from, to, average, scale);
    }
  });
}

// Broadcast and AllGather copy elements as bytes, whatever their dtype.
void ThreadCommunicator::RunBroadcast(const Collective& c) {
  if (rank_ != c.root && c.count > 0) {
    std::memcpy(c.data, group_->published(c.root).data, c.bytes());
  }
}

void ThreadCommunicator::RunAllGather(const Collective& c) {
  if (c.count == 0) return;
  const int64_t block = c.bytes();
  for (int r = 0; r < size(); ++r) {
    const void* from = group_->published(r).send;
    void* to = static_cast<char*>(c.data) + r * block;
    // In place, this rank's block is already where it belongs.
    if (from != to) std::memcpy(to, from, block);
  }
}

}  // namespace tandem
