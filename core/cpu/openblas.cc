#include "core/cpu/openblas.h"

#include <dlfcn.h>

#include <cstdlib>

namespace tandem {
namespace cpu {
namespace {

// Debian's pthread build first: the serial build lacks the locks that make
// concurrent calls safe (third_party/BUILD). Then the library path (the GPU
// machine's bundle carries that build as libopenblas.so.0).
constexpr const char* kCandidates[] = {
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "libopenblas.so.0",
};

template <typename F>
bool Find(void* handle, const char* name, F& function, std::string& error) {
  function = reinterpret_cast<F>(dlsym(handle, name));
  if (function == nullptr) error = std::string("no symbol ") + name + " in OpenBLAS";
  return function != nullptr;
}

void* Open(OpenBlas& blas) {
  std::string tried;
  for (const char* path : kCandidates) {
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
      blas.path = path;
      return handle;
    }
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : path);
  }
  blas.error = "cannot load OpenBLAS (" + tried + ")";
  return nullptr;
}

OpenBlas Load() {
  OpenBlas blas;
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const bool choose = (forced == nullptr || *forced == '\0') && CpuHasOpenBlasAvx512();
  if (choose) {
    setenv("OPENBLAS_CORETYPE", kOpenBlasCoreTypeChosen, 1);
    blas.set_coretype = kOpenBlasCoreTypeChosen;
  }
  void* handle = Open(blas);
  if (choose) unsetenv("OPENBLAS_CORETYPE");
  if (handle == nullptr) return blas;
  if (Find(handle, "cblas_sgemm", blas.sgemm, blas.error) &&
      Find(handle, "openblas_set_num_threads", blas.set_num_threads, blas.error) &&
      Find(handle, "openblas_get_corename", blas.corename, blas.error) &&
      Find(handle, "openblas_get_config", blas.config, blas.error)) {
    // One OpenBLAS thread per call, for the whole process: the intra-op
    // threads are ours (Note [Blocked GEMM] in cpu_gemm.h).
    blas.set_num_threads(1);
  }
  return blas;
}

}  // namespace

bool CpuHasOpenBlasAvx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

const OpenBlas& LoadedOpenBlas() {
  static const OpenBlas blas = Load();
  return blas;
}

}  // namespace cpu
}  // namespace tandem
