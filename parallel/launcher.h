// Launch: run one function per worker, each with its rank, device and
// communicator, whether the workers are threads of this process or MPI
// processes started by mpirun.
//
//   LaunchOptions options;       // filled from --mode, --workers, --device
//   options.mode = ParseLaunchMode(mode_flag);   // "threads" or "mpi"
//   options.workers = 4;
//   Launch(options, [](Worker& w) {
//     std::vector<float> grads = ComputeGrads(w.rank);
//     w.comm.AllReduce(grads.data(), grads.size(), ReduceOp::kAverage)->Wait();
//     if (w.is_root()) std::cout << "step done on " << w.size << " workers\n";
//   });
//
//   $ train --workers=4                 # 4 threads, one process
//   $ mpirun -np 4 train --mode=mpi     # 4 processes, world size from mpirun
//
// Failures. In threads mode, if a worker throws, Launch aborts the group so
// the other workers' collectives throw instead of waiting for it, joins every
// thread, then throws tandem::Error("worker <rank> failed: <message>") for
// the first worker that failed for its own reason (not the workers that were
// merely aborted). A worker that does not return within
// LaunchOptions::stop_grace_s of the failure (stuck outside any collective)
// is abandoned and named in that message. In mpi mode a worker that throws
// prints "rank <R> failed: <message>" to stderr and calls MPI_Abort, which
// ends the whole mpirun job: the other processes could otherwise wait in a
// collective forever.
//
// Workers on GPUs also get device communicators (Worker::device_comm), made
// by parallel/device_communicators.h.
#ifndef TANDEM_PARALLEL_LAUNCHER_H_
#define TANDEM_PARALLEL_LAUNCHER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "parallel/communicator.h"

namespace tandem {

enum class LaunchMode {
  kThreads,  // workers are threads of this process
  kMpi,      // one process per worker, started by mpirun
};

// "threads" or "mpi", as --mode takes them; throws tandem::Error naming
// --mode and the valid values for anything else.
LaunchMode ParseLaunchMode(const std::string& text);
// "threads" or "mpi".
const char* ToString(LaunchMode mode);

struct LaunchOptions {
  LaunchMode mode = LaunchMode::kThreads;
  // Threads mode: how many workers, 1 when unset. Mpi mode: must stay unset,
  // since mpirun -np decides; optional so that "set" is visible even for 1.
  std::optional<int> workers;
  // "cpu", "cuda" (worker i on GPU i in threads mode, on GPU node-local
  // rank in mpi mode: one GPU per worker, so more workers than GPUs on a
  // node is an error) or "auto" (cuda when a GPU is visible, else cpu).
  std::string device = "cpu";
  // A collective unfinished after this long fails the run with a message
  // naming it (threads and NCCL: an error; MPI: MPI_Abort of the job).
  double collective_timeout_s = 60.0;
  // Debug: compare every collective's (sequence, kind, size) across ranks
  // before running it (Communicator::set_fingerprint_channel); a mismatch
  // fails every rank naming who called what. Device communicators compare
  // over the worker's host communicator; in mpi mode the host communicator
  // compares over a second MpiCommunicator. ThreadCommunicator always checks
  // its own collectives.
  bool check_collectives = false;
  // Threads mode: after a worker fails, how long Launch waits for the others
  // to return before it reports the failure anyway, abandoning those still
  // running (stuck outside any collective; see Note [Stuck workers]).
  double stop_grace_s = 5.0;
  // Workers on GPUs: how many device communicators each gets for gradients
  // (Worker::gradient_comms). The reducer spreads its buckets over them so
  // that consecutive all-reduces overlap. More than one moves a bucketed
  // gradient faster when nothing else runs, but beside backward's GEMMs one
  // is faster (fewer NCCL kernels competing for SMs; docs/benchmarks.md),
  // hence the default.
  int gradient_comms = 1;
  // Workers on the CPU: intra-op threads per worker (--cpu_threads); 0 lets
  // TANDEM_CPU_THREADS or the launcher's sizing decide (hardware threads /
  // workers on this host; core/cpu/cpu_threads.h).
  int cpu_threads = 0;
};

struct Worker {
  int rank;
  int size;
  Device device;
  // The host communicator: host memory, for metadata and barriers.
  Communicator& comm;
  // A communicator over device memory (NCCL) for workers on GPUs, one rank
  // per worker; null on CPU. Same ranks as `comm`.
  Communicator* device_comm = nullptr;
  // All of this worker's device communicators (LaunchOptions::
  // gradient_comms of them, device_comm first); empty on CPU.
  std::vector<Communicator*> device_comms;

  // Rank 0: the worker that logs, evaluates and saves.
  bool is_root() const { return rank == 0; }
  // The communicator for the worker's gradients: NCCL on a GPU, the host
  // communicator on the CPU.
  Communicator& gradient_comm() const { return device_comm ? *device_comm : comm; }
  // The communicators to spread gradient buckets over (Reducer's comms
  // constructor): device_comms on a GPU, the host communicator on the CPU.
  std::vector<Communicator*> gradient_comms() const {
    if (!device_comms.empty()) return device_comms;
    return {&gradient_comm()};
  }
};

// This process's rank as an MPI launcher (mpirun, srun) set it in the
// environment before MPI starts; 0 when no launcher started it.
int LauncherWorldRank();

// Validates `options` (throwing tandem::Error that names the flag), then runs
// fn once per worker and returns when all have returned. See the failure
// rules above.
// Workers on the CPU: also sets the CPU backend's intra-op threads
// (LaunchOptions::cpu_threads, or hardware threads / workers on this host).
void Launch(const LaunchOptions& options,
            const std::function<void(Worker&)>& fn);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_LAUNCHER_H_
