// What the CPU backend's kernels (core/cpu/cpu_op_kernels.cc) share with the
// rest of the backend: the GEMM library chosen for the process and the
// intra-op threads every op may use. The kernels themselves are declared by
// the op table (core/op_table.h), as cpu::op_kernels::<Name>.
#ifndef TANDEM_CORE_CPU_CPU_OP_KERNELS_H_
#define TANDEM_CORE_CPU_CPU_OP_KERNELS_H_

#include "core/cpu/cpu_gemm.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {

// oneDNN or Eigen, chosen once per process (GemmLibraryFromEnvironment).
GemmLibrary KernelGemmLibrary();
// What one op may use of the intra-op threads, which every thread that runs
// CPU ops shares.
IntraOp KernelIntra();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_OP_KERNELS_H_
