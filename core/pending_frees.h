// PendingFrees: freed memory blocks that work on other lanes may still use,
// each held until the events recorded after that work have completed (Note
// [Stream-ordered reuse] in core/cuda/caching_allocator.h). A caching
// allocator adds a block when its last tensor goes and collects the blocks
// it may hand out again before each allocation:
//
//   pending.Add(ptr, size_class, std::move(events));
//   pending.Collect(/*all=*/false, [&](void* p, size_t size) { free_list[size].push_back(p); });
//
// Not thread-safe: the allocator's lock guards it.
#ifndef TANDEM_CORE_PENDING_FREES_H_
#define TANDEM_CORE_PENDING_FREES_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "core/lane.h"

namespace tandem {

class PendingFrees {
 public:
  // Holds `ptr` (of size class `size`) until every event in `after` has
  // completed.
  void Add(void* ptr, size_t size, std::vector<std::unique_ptr<LaneEvent>> after);
  // Calls release(ptr, size) once for each block whose events have all
  // completed, or for every block when `all` (the caller has waited for the
  // device), oldest first, and forgets those blocks. A block whose events
  // cannot be queried (a failed device) stays. `release` must not throw.
  void Collect(bool all, const std::function<void(void*, size_t)>& release);

  bool empty() const { return blocks_.empty(); }
  size_t size() const { return blocks_.size(); }

 private:
  struct Block {
    void* ptr;
    size_t size;
    std::vector<std::unique_ptr<LaneEvent>> after;
  };
  static bool Completed(const Block& block);

  std::vector<Block> blocks_;  // oldest first
};

}  // namespace tandem

#endif  // TANDEM_CORE_PENDING_FREES_H_
