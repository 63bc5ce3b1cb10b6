// Lanes: the ordered queues a device runs work on, and events that mark a
// point in a lane so that other lanes (or the host) can wait for it.
//
// Every op runs on a lane, named at the call: `ops::Gemm(lane, ...)`, or the
// main lane of its operands' device when the call names none. Work queued on
// one lane runs in call order; work on two lanes of one device may overlap
// and is ordered only where the code says so, with ops::WaitFor. On a GPU a
// lane is a CUDA stream (with its own cuBLAS handle and workspace); on the
// CPU every lane is the calling thread, so ops run at once, in call order.
//
//   Backend& gpu = GetBackend(Device::Cuda(0));
//   Lane main = gpu.main_lane(), side = gpu.side_lane();
//   ops::WaitFor(side, main);          // side starts after main's work so far
//   ops::Gemm(side, dz, true, x, false, dw);   // beside what main does next
//   ops::Gemm(main, dz, false, w, false, dx);
//   ops::WaitFor(main, side);          // main's later work sees dw
//
// A Backend owns its main and side lanes. NewLane makes more (an OwnedLane,
// destroyed with its owner): a communicator's stream, an optimizer's.
#ifndef TANDEM_CORE_LANE_H_
#define TANDEM_CORE_LANE_H_

#include <memory>
#include <string>

#include "core/device.h"

namespace tandem {

class Backend;

// What a backend keeps for one lane (a CUDA stream and its cuBLAS handle).
class LaneState {
 public:
  virtual ~LaneState() = default;
};

// A handle naming one lane of one device: cheap to copy, owns nothing. The
// lane must outlive every call that names it.
class Lane {
 public:
  // No lane: valid() is false, and ops refuse it.
  Lane() = default;
  Lane(Backend* backend, LaneState* state, const char* name);

  bool valid() const { return state_ != nullptr; }
  Backend& backend() const;
  Device device() const;
  LaneState* state() const { return state_; }
  // "main", "side" or the name given to NewLane; for messages.
  const char* name() const { return name_; }
  // "cuda:0 main lane"
  std::string Describe() const;

  // The same queue, with its GEMMs planned for `multiprocessors` fewer SMs
  // than the device has: for GEMMs that run beside kernels holding that
  // many (NCCL's all-reduces). A GEMM planned for every SM while some are
  // taken runs a straggling extra wave. Ignored on the CPU. Throws for a
  // reserve that leaves no SM.
  Lane WithGemmReserve(int multiprocessors) const;
  int gemm_reserve() const { return gemm_reserve_; }

  // Whether both name the same queue (whatever their GEMM reserve).
  friend bool SameQueue(const Lane& a, const Lane& b) {
    return a.state_ == b.state_;
  }

 private:
  friend class Backend;  // ReserveForGemm validates, then calls Reserved
  Lane Reserved(int multiprocessors) const {
    Lane lane = *this;
    lane.gemm_reserve_ = multiprocessors;
    return lane;
  }

  Backend* backend_ = nullptr;
  LaneState* state_ = nullptr;
  const char* name_ = "";
  int gemm_reserve_ = 0;
};

struct LaneOptions {
  std::string name = "lane";
  // Work queued here starts ahead of work queued on normal-priority lanes
  // (on a GPU: the highest stream priority), e.g. communication.
  bool high_priority = false;
};

// A lane made by Backend::NewLane, destroyed with this object, once the work
// queued on it has run. Move-only.
class OwnedLane {
 public:
  OwnedLane() = default;
  OwnedLane(Backend& backend, std::unique_ptr<LaneState> state,
            std::string name);
  OwnedLane(OwnedLane&&) = default;
  OwnedLane& operator=(OwnedLane&&) = default;

  Lane get() const;
  bool valid() const { return state_ != nullptr; }

 private:
  Backend* backend_ = nullptr;
  std::unique_ptr<LaneState> state_;
  std::unique_ptr<std::string> name_;  // stable address for Lane::name()
};

// A point in a lane's queue (Backend::NewEvent, Backend::Record). Ordering
// events are cheapest; timing events also measure time between two records.
// On the CPU an event is the host clock when it was recorded.
class LaneEvent {
 public:
  virtual ~LaneEvent() = default;
  // True once the lane has run everything queued before the record (or
  // when nothing was recorded).
  virtual bool Query() const = 0;
  // Blocks the host until then.
  virtual void Synchronize() const = 0;
  // Milliseconds from `start` (a timing event of the same kind of device)
  // to this one; waits for this one.
  virtual double ElapsedMsSince(const LaneEvent& start) const = 0;
};

}  // namespace tandem

#endif  // TANDEM_CORE_LANE_H_
