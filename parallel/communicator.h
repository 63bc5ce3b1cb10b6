// Communicator: the collectives data-parallel training needs, one interface
// for every transport (threads in one process, MPI, later NCCL).
//
// Every rank calls the same collectives with the same counts in the same
// order, as in MPI; a rank that skips or reorders one makes the others wait
// (ThreadCommunicator then times out naming the collective). Calls on one
// communicator must not overlap: one thread at a time issues its collectives.
//
//   void Step(Communicator& comm, std::vector<float>& grads) {
//     comm.AllReduce(grads.data(), grads.size(), ReduceOp::kAverage);
//     if (comm.rank() == 0) std::cout << comm.Describe() << "\n";
//   }
//
// Counts and bytes. Every count is a number of floats, never bytes, and may
// be 0 or any value (it need not divide by size()). Error messages give the
// size of a collective in bytes = 4 * count as passed by the calling rank:
// for AllGather that is what each rank contributes (it receives size() times
// as much). Barrier is 0 bytes.
//
// Results. AllReduce writes the same bits on every rank. ThreadCommunicator
// also fixes the order of the sum (see Note [Fixed reduction order] in
// thread_communicator.cc); kAverage is the sum multiplied by 1.0f / size(),
// on every communicator, so averages match across transports for sums that
// are exact.
#ifndef TANDEM_PARALLEL_COMMUNICATOR_H_
#define TANDEM_PARALLEL_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/tensor.h"

namespace tandem {

enum class ReduceOp { kSum, kAverage };

inline const char* ToString(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "average";
}

// Thrown by a collective because the group was aborted (a rank called
// Abort, or another rank failed or timed out). It is a consequence, not a
// cause: the launcher reports the original failure in preference to it.
// Its text is "collective aborted: <reason>".
class CollectiveAbortedError : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank, in [0, size()).
  virtual int rank() const = 0;
  // The number of ranks.
  virtual int size() const = 0;

  // In place: afterwards data[0, count) holds the element-wise sum (or
  // average) over all ranks, identical on every rank. Blocking on CPU.
  virtual void AllReduce(float* data, int64_t count, ReduceOp op) = 0;

  // Copies root's data[0, count) into every other rank's data.
  virtual void Broadcast(float* data, int64_t count, int root) = 0;

  // Returns once every rank has entered Barrier.
  virtual void Barrier() = 0;

  // recv[size() * count_per_rank] receives every rank's send[count_per_rank],
  // rank-major: rank r's block starts at recv + r * count_per_rank. `send`
  // may be exactly recv + rank() * count_per_rank (in place); otherwise the
  // two must not overlap.
  virtual void AllGather(const float* send, int64_t count_per_rank,
                         float* recv) = 0;

  // One line for logs: "ThreadCommunicator(rank 1 of 4)".
  virtual std::string Describe() const = 0;

  // Gives up on the group because this rank cannot go on. Transports that
  // can wake blocked ranks do (ThreadCommunicator: every collective in
  // progress or started later throws CollectiveAbortedError); those that
  // cannot (MPI) end the whole job, so nobody waits forever.
  virtual void Abort(const std::string& reason) = 0;

  // Stream-ordered collectives, for communicators over device memory (NCCL).
  // See Note [Queued all-reduce] in parallel/reducer.cc.
  //
  // QueueAllReduce returns at once: the all-reduce runs on the
  // communicator's own stream after everything the device's compute stream
  // and its side lane (Backend::BeginSideLane, where layers put their
  // gradients) have queued so far (events recorded there, waited on by the
  // communication stream); the compute stream itself waits for nothing. JoinQueued makes the compute stream's later work
  // wait for every queued all-reduce, again through an event: the host never
  // waits. Host-memory communicators return false from supports_queued().
  virtual bool supports_queued() const { return false; }
  virtual void QueueAllReduce(float* data, int64_t count, ReduceOp op) {
    TANDEM_CHECK(false) << Describe() << " has no stream-ordered all-reduce";
  }
  virtual void JoinQueued() {}
  // Runs `work` so that the ops it queues follow this communicator's queued
  // collectives and everything queued so far on the compute stream and its
  // side lane, and a later JoinQueued covers them too. On NCCL they go to a
  // stream of their own, so collectives queued later need not wait for them. Only element-wise ops (cuda::StreamOverride).
  // Host communicators, whose collectives are done when they return, just
  // run it.
  virtual void RunQueued(const std::function<void()>& work) { work(); }

  // A zeroed buffer of `count` floats on `device` for this communicator's
  // all-reduces; NCCL may hand out memory it reduces faster.
  virtual Tensor NewReduceBuffer(int64_t count, Device device) {
    return Tensor::Zeros({count}, device);
  }

  // For traces: while on, every QueueAllReduce records a TimeMarker on the
  // communication stream where its all-reduce starts (after the wait for
  // the compute stream) and where it ends; TakeQueuedSpans hands them over.
  struct QueuedSpan {
    std::unique_ptr<TimeMarker> start, end;
  };
  virtual void set_record_queue_times(bool record) {}
  virtual std::vector<QueuedSpan> TakeQueuedSpans() { return {}; }
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COMMUNICATOR_H_
