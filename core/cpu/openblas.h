// OpenBLAS, loaded at run time (dlopen) rather than linked, so that the CPU
// backend can choose its kernels before it loads.
//
//   const cpu::OpenBlas& blas = cpu::LoadedOpenBlas();
//   if (blas.loaded()) blas.sgemm(CblasRowMajor, CblasNoTrans, ...);
//   else std::cerr << blas.error;                   // what went wrong
//
// Note [Which OpenBLAS kernels]
// Rule: on a CPU with AVX-512, OpenBLAS runs its AVX-512 kernels (SkylakeX)
// unless the user picked others with OPENBLAS_CORETYPE.
// Mechanism: OpenBLAS picks its kernels once, while it loads, from the
// CPU's identity, or from OPENBLAS_CORETYPE when set. Debian 12's 0.3.21
// does not know CPUs newer than itself and falls back to older kernels
// (SSE3 ones, Prescott, on a recent Xeon). So LoadedOpenBlas() loads the
// library itself, on first use, and where OPENBLAS_CORETYPE is unset and
// the CPU has the AVX-512 subsets those kernels use (F, CD, BW, DQ, VL),
// sets OPENBLAS_CORETYPE=SkylakeX for the load and removes it again
// (kOpenBlasCoreTypeChosen). The first use is the CPU backend's
// construction (GemmLibraryFromEnvironment), before its threads exist:
// setenv is not safe beside other threads' getenv.
// No Tandem target links OpenBLAS (third_party/BUILD's openblas is headers
// only): a linked copy would have picked its kernels before main, and
// dlopen would return that copy.
#ifndef TANDEM_CORE_CPU_OPENBLAS_H_
#define TANDEM_CORE_CPU_OPENBLAS_H_

#include <cblas-openblas.h>

#include <string>

namespace tandem {
namespace cpu {

// The kernels chosen for a CPU with AVX-512 (see the Note).
constexpr const char* kOpenBlasCoreTypeChosen = "SkylakeX";

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_corename) corename = nullptr;
  decltype(&openblas_get_config) config = nullptr;
  std::string path;          // the file loaded
  std::string set_coretype;  // what OPENBLAS_CORETYPE was set to for the load; "" if none
  std::string error;         // why it is not loaded; "" when it is

  bool loaded() const { return error.empty(); }
};

// Loads OpenBLAS on the first call (Debian's pthread build, else
// libopenblas.so.0 from the library path) and returns it, loaded or with
// `error` saying why not. Never throws.
const OpenBlas& LoadedOpenBlas();

// Whether this CPU has the AVX-512 subsets OpenBLAS's SkylakeX kernels use.
bool CpuHasOpenBlasAvx512();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_OPENBLAS_H_
