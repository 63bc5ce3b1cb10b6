#include "core/pending_frees.h"

#include <cstddef>
#include <exception>
#include <utility>

namespace tandem {

void PendingFrees::Add(void* ptr, size_t size, std::vector<std::unique_ptr<LaneEvent>> after) {
  blocks_.push_back(Block{ptr, size, std::move(after)});
}

// LaneEvent::Query throws only for a failed device; the block then stays
// aside, and the failure surfaces at the next checked call.
bool PendingFrees::Completed(const Block& block) {
  try {
    for (const auto& event : block.after) {
      if (!event->Query()) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Note [Keeping a pending block's events]
// The blocks that stay are moved down over those released, in order. A block
// that stays where it is must not be move-assigned to itself: a vector
// move-assigned to itself comes out empty (libstdc++ swaps its contents out
// and destroys them), and a block with no events left counts as completed,
// so the next Collect would release it while its lanes still use it.
void PendingFrees::Collect(bool all, const std::function<void(void*, size_t)>& release) {
  size_t kept = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& block = blocks_[i];
    if (all || Completed(block)) {
      release(block.ptr, block.size);
      continue;
    }
    if (kept != i) blocks_[kept] = std::move(block);
    ++kept;
  }
  blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(kept), blocks_.end());
}

}  // namespace tandem
