// Event: an owned CUDA event (move-only RAII), and StreamWaitFor, the one
// helper that orders one stream after another.
//
// Events for ordering are created with cudaEventDisableTiming: recording and
// waiting on them is then cheapest. Event::Timing() makes one that can be
// timed, for benchmarks and traces.
//
//   // The communication stream must not read gradients before the compute
//   // stream has written them:
//   cuda::Event ready;
//   cuda::StreamWaitFor(comm_stream, compute_stream, ready);
//   ncclAllReduce(..., comm_stream);
//
//   cuda::Event start = cuda::Event::Timing(), stop = cuda::Event::Timing();
//   start.Record(s); Work(s); stop.Record(s);
//   float ms = stop.ElapsedMsSince(start);   // waits for `stop`
#ifndef TANDEM_CORE_CUDA_EVENT_H_
#define TANDEM_CORE_CUDA_EVENT_H_

#include <cuda_runtime_api.h>

namespace tandem {
namespace cuda {

class Event {
 public:
  // An ordering event (cudaEventDisableTiming), on the current device.
  Event();
  // An event that records timestamps, for ElapsedMsSince.
  static Event Timing();
  ~Event();  // never throws

  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  // Captures the work queued on `stream` so far.
  void Record(cudaStream_t stream);
  // Blocks the host until the captured work has run.
  void Synchronize() const;
  // True when the captured work has run (or nothing was recorded).
  bool Query() const;
  // Milliseconds from `start` to this event; both must be timing events and
  // recorded. Waits for this event.
  float ElapsedMsSince(const Event& start) const;

 private:
  explicit Event(unsigned flags);
  void Reset();

  cudaEvent_t event_ = nullptr;
};

// "Stream `waiter` waits for what stream `producer` has done so far":
// records `scratch` on producer and makes waiter wait for it, without
// blocking the host. Work queued on producer later is not waited for.
// `scratch` may be reused at once: a wait binds to the record it follows.
// The streams may belong to different devices of one process; `scratch` must
// have been created on the producer's device (CUDA records an event only on a
// stream of its own device).
void StreamWaitFor(cudaStream_t waiter, cudaStream_t producer, Event& scratch);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_EVENT_H_
