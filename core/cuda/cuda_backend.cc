// The registry of CUDA contexts and the backend's public functions.
#include "core/cuda/cuda_backend.h"

#include <array>
#include <atomic>
#include <mutex>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"

namespace tandem {
namespace cuda {
namespace {

struct Availability {
  int count = 0;
  std::string why_not;
};

const Availability& Probe() {
  static const Availability availability = [] {
    Availability a;
    const cudaError_t status = cudaGetDeviceCount(&a.count);
    if (status != cudaSuccess) {
      a.count = 0;
      a.why_not = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error for later calls
    } else if (a.count == 0) {
      a.why_not = "cudaGetDeviceCount returned 0";
    }
    return a;
  }();
  return availability;
}

constexpr int kMaxDevices = 64;

// One slot per device: `owner` holds the context from its creation on;
// `context` is the same pointer, read without a lock.
//
// Note [Context lifetime]
// A context lives as long as its owners: the registry, and every tensor made
// on the device (a Storage holds a share). The registry itself is never
// destroyed: at process exit the CUDA libraries tear down state of their own
// in static destructors whose order relative to ours nobody controls
// (cuBLAS creates some at the first handle, after the registry exists, so
// they would go first), and a cuBLAS handle destroyed after them corrupts
// the heap. The operating system reclaims the device at exit.
class Registry {
 public:
  std::shared_ptr<CudaContext> Get(int index) {
    Slot& slot = slots_[index];
    if (slot.context.load(std::memory_order_acquire) == nullptr) {
      std::lock_guard<std::mutex> lock(creation_mutex_);
      if (slot.context.load(std::memory_order_acquire) == nullptr) {
        DeviceGuard guard(index);
        slot.owner = std::make_shared<CudaContext>(index);
        slot.context.store(slot.owner.get(), std::memory_order_release);
      }
    }
    return slot.owner;
  }
  CudaContext& Ref(int index) {
    CudaContext* context = slots_[index].context.load(std::memory_order_acquire);
    return context != nullptr ? *context : *Get(index);
  }

 private:
  struct Slot {
    std::atomic<CudaContext*> context{nullptr};
    std::shared_ptr<CudaContext> owner;
  };
  std::mutex creation_mutex_;
  std::array<Slot, kMaxDevices> slots_;
};

// See Note [Context lifetime]: deliberately never destroyed.
Registry& Contexts() {
  static Registry* registry = new Registry();
  return *registry;
}

void CheckIndex(int index) {
  const int count = DeviceCount();
  TANDEM_CHECK(index >= 0 && index < count)
      << "cuda:" << index << " is not available: "
      << (count == 0 ? "no CUDA devices (" + UnavailableReason() + ")"
                     : std::to_string(count) + " CUDA device(s) visible");
  TANDEM_CHECK(index < kMaxDevices) << "cuda:" << index << ": Tandem supports "
                                    << kMaxDevices << " devices per process";
}

}  // namespace

int DeviceCount() { return Probe().count; }
std::string UnavailableReason() { return Probe().why_not; }

Backend& GetCudaBackend(int index) {
  CheckIndex(index);
  return Contexts().Ref(index);
}

std::shared_ptr<Backend> SharedCudaBackend(int index) {
  CheckIndex(index);
  return Contexts().Get(index);
}

cudaStream_t NativeStream(const Lane& lane) { return CudaLaneOf(lane).stream(); }

void SetCurrentDevice(int index) {
  CUDA_CHECK(cudaSetDevice(index)) << "binding this thread to cuda:" << index;
}

}  // namespace cuda
}  // namespace tandem
