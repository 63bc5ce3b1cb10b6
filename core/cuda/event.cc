#include "core/cuda/event.h"

#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/host_wait.h"

namespace tandem {
namespace cuda {

Event::Event() : Event(cudaEventDisableTiming) {}

Event::Event(unsigned flags) {
  CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

Event Event::Timing() { return Event(cudaEventDefault); }

Event::~Event() { Reset(); }

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::Record(cudaStream_t stream) {
  CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::Synchronize() const {
  CountHostWait();
  // Polled, not cudaEventSynchronize: see Note [Abandoned host waits].
  WaitUntilDone([this] { return Query(); }, "waiting for a GPU event");
}

bool Event::Query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: don't leave it for the next check
    return false;
  }
  CUDA_CHECK(status);
  return true;
}

float Event::ElapsedMsSince(const Event& start) const {
  Synchronize();
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_))
      << "timing needs two events made by Event::Timing()";
  return ms;
}

void Event::Reset() {
  if (event_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaEventDestroy(event_));
  event_ = nullptr;
}

void StreamWaitFor(cudaStream_t waiter, cudaStream_t producer, Event& scratch) {
  scratch.Record(producer);
  CUDA_CHECK(cudaStreamWaitEvent(waiter, scratch.get(), 0));
}

}  // namespace cuda
}  // namespace tandem
