#include "core/profile_range.h"

#include <atomic>
#include <memory>
#include <mutex>

#ifdef TANDEM_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace tandem {
namespace {

// The listener, swapped whole under the mutex; `listening` lets ranges skip
// the mutex while there is none.
std::atomic<bool> listening{false};
std::mutex listener_mutex;
std::shared_ptr<const ProfileRangeListener>& ListenerSlot() {
  static auto* slot = new std::shared_ptr<const ProfileRangeListener>();  // never destroyed
  return *slot;
}

std::shared_ptr<const ProfileRangeListener> CurrentListener() {
  std::lock_guard<std::mutex> lock(listener_mutex);
  return ListenerSlot();
}

void Notify(const char* name, bool push) {
  const std::shared_ptr<const ProfileRangeListener> listener = CurrentListener();
  if (listener != nullptr) (*listener)(name, push);
}

// Note [Is a profiler attached]
// NVTX loads a tool on its first call (the library named by
// NVTX_INJECTION64_PATH, which a profiler sets for the program it starts)
// and, with none, leaves every call a no-op; a push then returns
// NVTX_NO_PUSH_POP_TRACKING. So one probe push, the first time a range
// asks, tells for the rest of the process whether a tool records ranges;
// without one, ranges skip NVTX and their names are never built. A tool
// sees the probe as an empty range named "tandem".
bool NvtxToolAttached() {
#ifdef TANDEM_WITH_NVTX
  static const bool attached = [] {
    if (nvtxRangePushA("tandem") == NVTX_NO_PUSH_POP_TRACKING) return false;
    nvtxRangePop();
    return true;
  }();
  return attached;
#else
  return false;
#endif
}

void NvtxPush(const char* name) {
#ifdef TANDEM_WITH_NVTX
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void NvtxPop() {
#ifdef TANDEM_WITH_NVTX
  nvtxRangePop();
#endif
}

}  // namespace

bool ProfileRange::Enabled() {
  return listening.load(std::memory_order_relaxed) || NvtxToolAttached();
}

void ProfileRange::Push(const char* name) {
  pushed_ = true;
  to_nvtx_ = NvtxToolAttached();
  if (to_nvtx_) NvtxPush(name);
  to_listener_ = listening.load(std::memory_order_acquire);
  if (to_listener_) {
    name_ = name;
    Notify(name, /*push=*/true);
  }
}

void ProfileRange::Pop() {
  if (to_nvtx_) NvtxPop();
  if (to_listener_) Notify(name_.c_str(), /*push=*/false);
}

void SetProfileRangeListenerForTesting(ProfileRangeListener listener) {
  std::shared_ptr<const ProfileRangeListener> next;
  if (listener) next = std::make_shared<const ProfileRangeListener>(std::move(listener));
  std::lock_guard<std::mutex> lock(listener_mutex);
  listening.store(next != nullptr, std::memory_order_release);
  ListenerSlot() = std::move(next);
}

}  // namespace tandem
