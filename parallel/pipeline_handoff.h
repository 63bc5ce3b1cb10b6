// Internal to parallel/pipeline: how a micro-batch's activation or gradient
// crosses a stage boundary. One HandoffLink per boundary and direction;
// the producing stage's thread calls Send, the receiving stage's thread
// Receive, and the pipeline's own thread Release once the step is over.
//
//   HandoffLink link("replica 0: stage 0 -> 1 activations", Device::Cuda(0),
//                    Device::Cuda(1), /*micro_batches=*/4);
//   link.Send(m, y, lane0);                // stage 0's thread: never waits
//   Tensor x = link.Receive(m, lane1);     // stage 1's thread: on cuda:1
//   link.Release();                        // after the step
//
// Everything device specific goes through the Backend (core/backend.h):
// events, peer copies and peer access. See Note [Cross-device hand-off] in
// pipeline_handoff.cc.
#ifndef TANDEM_PARALLEL_PIPELINE_HANDOFF_H_
#define TANDEM_PARALLEL_PIPELINE_HANDOFF_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace internal {

// Thrown by a hand-off after the pipeline was aborted: a consequence of
// another stage's failure, not a cause (like CollectiveAbortedError).
class StageAbortedError : public Error {
 public:
  using Error::Error;
};

// Whether a hand-off from `from` to `to` is a peer copy: two devices of the
// same kind other than the CPU (two GPUs). Other pairs pass handles, or copy
// through Tensor::To where the kinds differ.
bool IsPeerPair(Device from, Device to);

// One peer-copy slot of a link (one per micro-batch). See Note
// [Cross-device hand-off].
struct PeerSlot {
  Tensor src;  // the producer's tensor, kept until Release
  // Recorded by the producer on its lane after the work that wrote src.
  std::unique_ptr<LaneEvent> ready;
  // Recorded by the receiver on its lane after the copy out of src.
  std::unique_ptr<LaneEvent> consumed;
  // Set by the receiver once the copy is queued and `consumed` recorded.
  std::atomic<bool> copied{false};
};

// What crosses the boundary: a handle (same device, or devices of
// different kinds) or the slot whose copy the receiver queues.
struct Handoff {
  int micro = -1;
  Tensor tensor;
  PeerSlot* peer = nullptr;
};

// A bounded FIFO between two stage threads (mutex + condition variable).
// The only place a stage's host thread waits for its neighbour, and an
// abortable one with a deadline: Abort wakes both sides, and every later
// Push or Pop throws StageAbortedError; a wait longer than `timeout` throws
// tandem::Error naming the channel and the micro-batch.
class HandoffChannel {
 public:
  HandoffChannel(std::string name, size_t capacity, std::chrono::milliseconds timeout)
      : name_(std::move(name)), capacity_(capacity), timeout_(timeout) {}

  void Push(Handoff item);
  // The next item, which must be micro-batch `micro` (for the messages).
  Handoff Pop(int micro);
  void Abort(const std::string& reason);
  const std::string& name() const { return name_; }

 private:
  void ThrowIfAborted() const;

  const std::string name_;
  const size_t capacity_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Handoff> items_;
  bool aborted_ = false;
  std::string reason_;
};

// One direction of one stage boundary: micro-batches from the stage on
// `from` to the stage on `to`, in schedule order.
class HandoffLink {
 public:
  // `name` is for errors ("replica 0: stage 0 -> 1 activations"). Peer
  // pairs get one slot (two events) per micro-batch, made once. A Send or
  // Receive that waits longer than `timeout` for the other stage throws.
  HandoffLink(std::string name, Device from, Device to, int micro_batches,
              std::chrono::milliseconds timeout);
  HandoffLink(const HandoffLink&) = delete;
  HandoffLink& operator=(const HandoffLink&) = delete;

  // The producer's thread: hands `t` (micro-batch `micro`, written by work
  // queued on `lane`, a lane of `from`) to the receiver. Never waits for a
  // device.
  void Send(int micro, const Tensor& t, const Lane& lane);
  // The receiver's thread: micro-batch `micro` on `to`, ready for work
  // queued on `lane` after this call. `lane` is `to`'s main lane, which
  // orders the destination's allocation (Note [Stage lane] in
  // pipeline_stage.cc). Waits on the host only for the producer's Send,
  // abortably.
  Tensor Receive(int micro, const Lane& lane);
  // Makes Send and Receive throw StageAbortedError, now and later.
  void Abort(const std::string& reason) { channel_.Abort(reason); }
  // After a step, while no stage thread runs: gives every kept source back
  // to its device, ordered after the receiver's copy.
  void Release();

  bool peer() const { return !slots_.empty(); }

 private:
  Tensor CopyFromSlot(PeerSlot& slot, const Lane& lane);

  HandoffChannel channel_;
  const Device from_, to_;
  std::vector<std::unique_ptr<PeerSlot>> slots_;  // per micro-batch; peer pairs
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_PARALLEL_PIPELINE_HANDOFF_H_
