#include "core/cuda/tf32.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tandem {
namespace cuda {
namespace {

std::atomic<bool>& Tf32Flag() {
  static std::atomic<bool> allow = [] {
    const char* env = std::getenv("TANDEM_ALLOW_TF32");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return allow;
}

}  // namespace

void SetAllowTf32(bool allow) { Tf32Flag().store(allow); }
bool AllowTf32() { return Tf32Flag().load(); }

}  // namespace cuda
}  // namespace tandem
