// A stand-in for a profiler's NVTX tool, for profile_range_nvtx_test.cc: the
// library that a profiler names in NVTX_INJECTION64_PATH, which NVTX loads on
// its first call. It records range pushes and pops, so ProfileRange's path
// into NVTX is tested without Nsight.
// Types and declarations only: a tool implements none of the API.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>

namespace {

std::mutex mutex;
std::string events;  // "+name;" for a push, "-;" for a pop
int depth = 0;

int NVTX_API RangePushA(const char* message) {
  std::lock_guard<std::mutex> lock(mutex);
  events += std::string("+") + message + ";";
  return depth++;
}

int NVTX_API RangePop() {
  std::lock_guard<std::mutex> lock(mutex);
  events += "-;";
  return --depth;
}

}  // namespace

extern "C" {

// NVTX's entry point into a tool: install the callbacks; non-zero is success.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
      size <= NVTX_CBID_CORE_RangePop) {
    return 0;
  }
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&RangePushA);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&RangePop);
  return 1;
}

// What the tool has recorded, for the test (which finds it with dlsym).
__attribute__((visibility("default"))) void FakeNvtxToolEvents(std::string* out) {
  std::lock_guard<std::mutex> lock(mutex);
  *out = events;
}

}  // extern "C"
