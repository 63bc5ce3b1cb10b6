#include "core/cuda/host_wait.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "core/check.h"

namespace tandem {
namespace cuda {
namespace {

std::atomic<bool> g_abandoned{false};

std::mutex& ReasonMutex() {
  static std::mutex mu;
  return mu;
}

std::string& Reason() {
  static std::string* reason = new std::string;  // outlives static destructors
  return *reason;
}

}  // namespace

// A wait that ends within microseconds (most do: the host is rarely far
// ahead when it asks) costs only the spin; a long one sleeps in short steps
// so it costs no core and still notices an abandonment within a millisecond.
void WaitUntilDone(const std::function<bool()>& done, const char* what) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  while (!done()) {
    if (g_abandoned.load(std::memory_order_acquire)) {
      throw Error(std::string(what) + " abandoned: " + HostWaitsAbandonedReason());
    }
    if (Clock::now() - start < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void AbandonHostWaits(const std::string& reason) {
  std::lock_guard<std::mutex> lock(ReasonMutex());
  if (g_abandoned.load()) return;
  Reason() = reason;
  g_abandoned.store(true, std::memory_order_release);
}

std::string HostWaitsAbandonedReason() {
  std::lock_guard<std::mutex> lock(ReasonMutex());
  return g_abandoned.load() ? Reason() : std::string();
}

void ResumeHostWaits() {
  std::lock_guard<std::mutex> lock(ReasonMutex());
  g_abandoned.store(false);
  Reason().clear();
}

}  // namespace cuda
}  // namespace tandem
