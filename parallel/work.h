// Work: what every collective returns, as PyTorch's c10d Work does.
//
// A collective starts when its call returns and finishes later. Host
// transports (threads, MPI) run it on their communicator's progress thread;
// NCCL queues it on its communication lane and marks its end with an event.
// Either way the caller decides how to wait:
//
//   auto work = comm.AllReduce(grads, n, ReduceOp::kSum);
//   work->Wait();            // the host blocks until the result is in place
//
//   auto work = nccl.AllReduce(bucket, n, ReduceOp::kSum, {{main, side}});
//   work->WaitOn(main);      // main's later kernels follow it; the host
//                            // goes on at once
//
// A failed collective throws from Wait (or from WaitOn on host transports);
// a collective of an aborted group throws CollectiveAbortedError.
#ifndef TANDEM_PARALLEL_WORK_H_
#define TANDEM_PARALLEL_WORK_H_

#include <memory>

#include "core/lane.h"

namespace tandem {

class Work {
 public:
  virtual ~Work() = default;

  // Blocks the host until the collective has finished; throws its error.
  virtual void Wait() = 0;
  // `lane`'s later work runs after the collective. Device transports: an
  // event wait, the host does not block. Host transports: Wait(), after
  // which the result is in place for every lane.
  virtual void WaitOn(const Lane& lane) = 0;
  // True when WaitOn would return without the host waiting: the collective
  // has finished, or it is queued on a device lane.
  virtual bool ReadyForLanes() const = 0;
  // True once the collective has finished; never blocks.
  virtual bool IsCompleted() const = 0;

  // Where the collective started and ended (timing events of its lane;
  // the host clock on host transports), when its CollectiveOptions asked
  // for timing; null otherwise. ElapsedMsSince waits for the end.
  const LaneEvent* started() const { return started_.get(); }
  const LaneEvent* finished() const { return finished_.get(); }

 protected:
  std::unique_ptr<LaneEvent> started_;
  std::unique_ptr<LaneEvent> finished_;
};

// A Work that is already done: for collectives with nothing to do (one
// rank, no elements) and for tests.
class CompletedWork final : public Work {
 public:
  void Wait() override {}
  void WaitOn(const Lane&) override {}
  bool ReadyForLanes() const override { return true; }
  bool IsCompleted() const override { return true; }
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_WORK_H_
