// Device memory allocators. Each device's Backend owns one; tensors return
// their storage to it when the last handle goes away.
#ifndef TANDEM_CORE_ALLOCATOR_H_
#define TANDEM_CORE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tandem {

class LaneEvent;  // core/lane.h

struct MemoryStats {
  int64_t bytes_in_use = 0;       // handed out to tensors now
  int64_t peak_bytes_in_use = 0;  // the most ever handed out at once
  int64_t bytes_reserved = 0;     // held from the system (>= in use when caching)
  int64_t system_allocations = 0; // calls to the system allocator (malloc, cudaMalloc)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `bytes` bytes (64-byte aligned at least); bytes == 0
  // returns nullptr.
  virtual void* Allocate(size_t bytes) = 0;
  // `bytes` must be the size passed to Allocate.
  virtual void Free(void* ptr, size_t bytes) = 0;
  // Frees `ptr` for reuse once every event in `after` has completed: for
  // memory that work queued on other lanes than the device's main lane may
  // still use (Tensor::RecordLane). A caching allocator keeps the block
  // aside and hands it out again only once they have completed; one whose
  // lanes all run in call order may free it at once. Never throws.
  virtual void FreeAfter(void* ptr, size_t bytes,
                         std::vector<std::unique_ptr<LaneEvent>> after) = 0;
  virtual MemoryStats stats() const = 0;
  // Starts peak_bytes_in_use again from what is in use now (to measure the
  // peak of one phase of a run).
  virtual void ResetPeak() = 0;
};

}  // namespace tandem

#endif  // TANDEM_CORE_ALLOCATOR_H_
