#include "core/cpu/scratch.h"

#include <algorithm>

namespace tandem {
namespace cpu {

Scratch::Scratch(int64_t n) {
  std::vector<Buffer>& free = FreeBuffers();
  auto best = free.end();
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (it->capacity >= n && (best == free.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != free.end()) {
    buffer_ = std::move(*best);
    free.erase(best);
  } else {
    buffer_ = Buffer{n, std::unique_ptr<float[]>(new float[static_cast<size_t>(n)])};
  }
}

Scratch::~Scratch() {
  std::vector<Buffer>& free = FreeBuffers();
  free.push_back(std::move(buffer_));
  if (free.size() > kKeep) {  // drop the smallest
    free.erase(std::min_element(free.begin(), free.end(), [](const Buffer& a, const Buffer& b) {
      return a.capacity < b.capacity;
    }));
  }
}

std::vector<Scratch::Buffer>& Scratch::FreeBuffers() {
  thread_local std::vector<Buffer> free;
  return free;
}

}  // namespace cpu
}  // namespace tandem
