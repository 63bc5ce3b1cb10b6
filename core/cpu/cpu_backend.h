// The CPU backend: Eigen maps over Tandem's storage (no copies), ops run
// synchronously on the calling thread; GEMMs go to oneDNN or Eigen, split over
// the context's intra-op threads (core/cpu/cpu_gemm.h, core/cpu/cpu_threads.h).
// Thread-safe: every worker thread of threads mode shares this one context.
#ifndef TANDEM_CORE_CPU_CPU_BACKEND_H_
#define TANDEM_CORE_CPU_CPU_BACKEND_H_

#include <memory>

#include "core/backend.h"

namespace tandem {
namespace cpu {

// The CPU's context; the registry (core/backend_registry.h) holds it.
std::shared_ptr<Backend> CpuContext();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_BACKEND_H_
