// How many threads the CPU backend may use inside one op (intra-op threads),
// a process-wide setting the CPU context reads at each op.
//
//   cpu::SetCpuThreads(4);          // e.g. from a --cpu_threads flag
//   int t = cpu::CpuThreads();      // 4
//
// Which value holds, first match:
//   1. SetCpuThreads(n) with n >= 1 (a flag);
//   2. the environment variable TANDEM_CPU_THREADS=n;
//   3. the launcher's sizing, SizeCpuThreadsForWorkers(w): hardware threads
//      / w, at least 1, so that w workers on this host x threads <= cores;
//   4. all hardware threads.
// The thread count changes speed only, never results: see Note [Blocked
// GEMM] in core/cpu/cpu_gemm.h.
#ifndef TANDEM_CORE_CPU_CPU_THREADS_H_
#define TANDEM_CORE_CPU_CPU_THREADS_H_

namespace tandem {
namespace cpu {

// Sets the intra-op thread count (n >= 1), or clears it (n == 0) so that the
// environment, the launcher or the hardware decide. Throws tandem::Error
// naming --cpu_threads for n < 0.
void SetCpuThreads(int n);
// The launcher's default for `workers` workers on this host (threads mode:
// its worker count; mpi mode: the node-local rank count).
void SizeCpuThreadsForWorkers(int workers);
// The intra-op thread count now in force (>= 1). Throws tandem::Error
// naming TANDEM_CPU_THREADS when that variable is set but is not a positive
// integer.
int CpuThreads();
// std::thread::hardware_concurrency(), at least 1.
int HardwareThreads();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_THREADS_H_
