#include "parallel/pipeline_handoff.h"

#include <sstream>
#include <utility>

#include "core/backend.h"
#include "core/backend_registry.h"

namespace tandem {
namespace internal {

// Note [Cross-device hand-off]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Rule: a micro-batch's activation (or gradient) made by the stage on
// device a goes to the stage on device b (two GPUs) without the host waiting
// for either device. Mechanism, all through the Backend interface:
//   1. the producer records `ready` (an ordering event of a) on its lane
//      after the work that wrote the tensor, and pushes the slot through the
//      channel: the receiver's host thread gets a handle, not data;
//   2. the receiver allocates the destination on b, makes its lane wait for
//      `ready` (Backend::Wait takes an event of another device of the same
//      kind), queues CopyFromPeer on that lane and records `consumed` (an
//      event of b) after it.
// Lifetime: the source block belongs to a's allocator, which hands a freed
// block out again at once, relying on a's main lane for order (Note
// [Stream-ordered reuse] in core/cuda/caching_allocator.h). b's lane reads
// the block, so freeing it when the receiver drops its handle would let a
// overwrite it while the copy may still be running. The producer's slot
// therefore keeps the source for the whole step; after the step, when every
// receiver has queued its copy, a's main lane waits for each `consumed`
// event and only then is the source released (Release): any later reuse of
// the block on a is ordered after the copy. A slot whose copy was never
// queued (an aborted step) is released at once: no other lane reads it.
// Costs: a step's stage outputs stay allocated until its end (as large as
// the receiver's saved inputs), and two events per micro-batch and
// boundary, made once and re-recorded every step. Each receiving device
// enables peer access to its producer once, so copies go device to device
// (NVLink) where the hardware can.
//
// The host waits for a neighbour only in HandoffChannel::Pop (and Push, at
// capacity), which Abort interrupts; see Note [Abort] in pipeline.cc.

bool IsPeerPair(Device from, Device to) {
  return from.kind == to.kind && !from.is_cpu() && from.index != to.index;
}

namespace {
std::string Seconds(std::chrono::milliseconds t) {
  std::ostringstream out;
  out << t.count() / 1000.0 << " s";
  return out.str();
}
}  // namespace

void HandoffChannel::Push(Handoff item) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool room = cv_.wait_for(lock, timeout_,
                                 [&] { return aborted_ || items_.size() < capacity_; });
  ThrowIfAborted();
  if (!room) {
    throw Error(name_ + ": micro-batch " + std::to_string(item.micro) + " waited " +
                Seconds(timeout_) + " for the receiving stage to take the ones before it (it "
                "stopped or is stuck; PipelineOptions::handoff_timeout)");
  }
  items_.push_back(std::move(item));
  cv_.notify_all();
}

Handoff HandoffChannel::Pop(int micro) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool arrived = cv_.wait_for(lock, timeout_, [&] { return aborted_ || !items_.empty(); });
  ThrowIfAborted();
  if (!arrived) {
    throw Error(name_ + ": micro-batch " + std::to_string(micro) + " did not arrive within " +
                Seconds(timeout_) +
                " (the sending stage stopped or is stuck; PipelineOptions::handoff_timeout)");
  }
  Handoff item = std::move(items_.front());
  items_.pop_front();
  cv_.notify_all();
  return item;
}

void HandoffChannel::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) reason_ = reason;
  aborted_ = true;
  items_.clear();
  cv_.notify_all();
}

void HandoffChannel::ThrowIfAborted() const {
  if (aborted_) throw StageAbortedError(name_ + " aborted: " + reason_);
}

HandoffLink::HandoffLink(std::string name, Device from, Device to, int micro_batches,
                         std::chrono::milliseconds timeout)
    : channel_(std::move(name), static_cast<size_t>(micro_batches), timeout),
      from_(from),
      to_(to) {
  if (!IsPeerPair(from, to)) return;
  Backend& producer = GetBackend(from);
  Backend& receiver = GetBackend(to);
  receiver.EnablePeerAccess(from);
  for (int m = 0; m < micro_batches; ++m) {
    auto slot = std::make_unique<PeerSlot>();
    // An event is recorded on a lane of the backend that made it.
    slot->ready = producer.NewEvent(/*timing=*/false);
    slot->consumed = receiver.NewEvent(/*timing=*/false);
    slots_.push_back(std::move(slot));
  }
}

void HandoffLink::Send(int micro, const Tensor& t, const Lane& lane) {
  TANDEM_CHECK(t.defined())
      << channel_.name() << ": micro-batch " << micro
      << " has no tensor to hand over (a backward returned no input gradient?)";
  if (slots_.empty()) {
    channel_.Push(Handoff{micro, t, nullptr});
    return;
  }
  PeerSlot& slot = *slots_.at(micro);
  slot.src = t;
  slot.copied.store(false);
  lane.backend().Record(*slot.ready, lane);
  channel_.Push(Handoff{micro, Tensor(), &slot});
}

Tensor HandoffLink::Receive(int micro, const Lane& lane) {
  Handoff item = channel_.Pop(micro);
  // Stages send micro-batches in schedule order through FIFO channels.
  TANDEM_CHECK(item.micro == micro)
      << channel_.name() << ": expected micro-batch " << micro << ", received "
      << item.micro;
  if (item.peer != nullptr) return CopyFromSlot(*item.peer, lane);
  const Tensor& t = item.tensor;
  return t.device() == to_ ? t : t.To(to_);
}

Tensor HandoffLink::CopyFromSlot(PeerSlot& slot, const Lane& lane) {
  Backend& receiver = lane.backend();
  Tensor dst = Tensor::Empty(slot.src.shape(), to_);
  receiver.Wait(lane, *slot.ready);
  receiver.CopyFromPeer(lane, dst.data(), from_, slot.src.data(),
                        static_cast<size_t>(dst.numel()) * sizeof(float));
  receiver.Record(*slot.consumed, lane);
  slot.copied.store(true);
  return dst;
}

void HandoffLink::Release() {
  if (slots_.empty()) return;
  Backend& producer = GetBackend(from_);
  const Lane reuse = producer.main_lane();  // the allocator's order
  for (auto& slot : slots_) {
    if (!slot->src.defined()) continue;
    if (slot->copied.load()) producer.Wait(reuse, *slot->consumed);
    slot->src = Tensor();
  }
}

}  // namespace internal
}  // namespace tandem
