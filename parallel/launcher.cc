#include "parallel/launcher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "parallel/mpi_communicator.h"
#include "parallel/thread_communicator.h"

#ifdef TANDEM_WITH_CUDA
#include "parallel/nccl_communicator.h"
#endif

namespace tandem {

namespace {

// Remembers which worker failed first for its own reason. A worker that
// throws aborts the group, so the others' collectives throw
// CollectiveAbortedError a moment later; those are echoes of the failure,
// reported only if no worker failed for a reason of its own.
class FirstFailure {
 public:
  void Record(int rank, const std::string& message, bool aborted) {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank_ >= 0 && !(aborted_ && !aborted)) return;
    rank_ = rank;
    message_ = message;
    aborted_ = aborted;
  }

  bool any() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rank_ >= 0;
  }

  void ThrowIfAny(const std::string& suffix = "") const {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank_ < 0) return;
    throw Error("worker " + std::to_string(rank_) + " failed: " + message_ + suffix);
  }

 private:
  mutable std::mutex mu_;
  int rank_ = -1;
  std::string message_;
  bool aborted_ = false;
};

std::chrono::milliseconds TimeoutOf(const LaunchOptions& options) {
  return std::chrono::milliseconds(static_cast<int64_t>(options.collective_timeout_s * 1000));
}

// Note [Stuck workers]
// ~~~~~~~~~~~~~~~~~~~~
// After a failure, Launch aborts the group: workers waiting in a collective
// wake up with CollectiveAbortedError and return. A worker stuck outside any
// collective (a deadlock in user code, a read that never returns) cannot be
// woken, and joining it would hang the run with the error unreported. So
// Launch waits at most LaunchOptions::stop_grace_s after the first failure,
// then detaches the workers still running and throws, naming them. The
// process should then exit: an abandoned thread may still run user code.
// What the threads share lives on the heap, owned by them and by Launch
// together, so an abandoned thread that wakes up later touches nothing that
// has been freed.
struct ThreadLaunch {
  ThreadLaunch(int workers, const std::function<void(Worker&)>& fn)
      : group(workers), fn(fn), done(static_cast<size_t>(workers), false) {}
  ThreadGroup group;
#ifdef TANDEM_WITH_CUDA
  std::vector<std::unique_ptr<NcclThreadGroup>> nccl;  // one per lane
#endif
  FirstFailure failure;
  const std::function<void(Worker&)> fn;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> done;  // guarded by mu

  bool AllDone() const {  // requires mu
    return std::find(done.begin(), done.end(), false) == done.end();
  }

  // Gives up on the host group and, on GPUs, on the NCCL ranks too: their
  // kernels would otherwise wait on the device for the failed worker forever.
  void AbortAll(const std::string& reason) {
    group.Abort(reason);
#ifdef TANDEM_WITH_CUDA
    for (auto& lane : nccl) lane->Abort(reason);
#endif
  }
  void Finished(int rank) {
    std::lock_guard<std::mutex> lock(mu);
    done[static_cast<size_t>(rank)] = true;
    cv.notify_all();
  }
};

void RunWorker(const std::shared_ptr<ThreadLaunch>& launch, int rank, Device device,
               const LaunchOptions& options) {
  ThreadLaunch& l = *launch;
  // One GPU per worker thread: worker i drives cuda:i.
  const Device mine = device.is_cuda() ? Device::Cuda(rank) : device;
  Worker worker{rank, l.group.size(), mine, l.group.communicator(rank), nullptr, {}};
#ifdef TANDEM_WITH_CUDA
  for (auto& lane : l.nccl) {
    NcclCommunicator& nccl = lane->communicator(rank);
    nccl.set_timeout(TimeoutOf(options));
    if (options.check_collectives) nccl.set_check_fingerprints(&worker.comm);
    worker.device_lanes.push_back(&nccl);
  }
  if (!worker.device_lanes.empty()) worker.device_comm = worker.device_lanes[0];
#endif
  std::string message;
  try {
    BindThreadToDevice(mine);
    l.fn(worker);
    return;
  } catch (const CollectiveAbortedError& e) {
    l.failure.Record(rank, e.what(), /*aborted=*/true);
    return;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception (not derived from std::exception)";
  }
  // Record before aborting, so that an echo cannot be recorded first.
  l.failure.Record(rank, message, /*aborted=*/false);
  l.AbortAll("worker " + std::to_string(rank) + " failed: " + message);
}

void LaunchThreads(int workers, Device device, const LaunchOptions& options,
                   const std::function<void(Worker&)>& fn) {
  auto launch = std::make_shared<ThreadLaunch>(workers, fn);
  launch->group.set_timeout(TimeoutOf(options));
#ifdef TANDEM_WITH_CUDA
  // Workers on GPUs also get an NCCL rank each (worker i on cuda:i, as in
  // RunWorker), all created here before any thread starts; see NcclThreadGroup.
  if (device.is_cuda()) {
    std::vector<int> gpus(workers);
    for (int rank = 0; rank < workers; ++rank) gpus[rank] = rank;
    for (int lane = 0; lane < options.gradient_lanes; ++lane) {
      launch->nccl.push_back(std::make_unique<NcclThreadGroup>(gpus));
    }
  }
#endif
  std::vector<std::thread> threads;
  threads.reserve(workers);
  try {
    for (int rank = 0; rank < workers; ++rank) {
      threads.emplace_back([launch, rank, device, options] {
        RunWorker(launch, rank, device, options);
        launch->Finished(rank);
      });
    }
  } catch (...) {
    // Workers already running would wait for the missing ranks forever.
    launch->AbortAll("could not start " + std::to_string(workers) + " worker threads");
    for (std::thread& t : threads) t.join();
    throw;
  }
  // Every worker returns, or one fails and the rest get stop_grace_s to
  // follow (Note [Stuck workers]).
  std::vector<bool> done;
  {
    std::unique_lock<std::mutex> lock(launch->mu);
    launch->cv.wait(lock, [&] { return launch->AllDone() || launch->failure.any(); });
    const auto grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(std::max(0.0, options.stop_grace_s)));
    launch->cv.wait_for(lock, grace, [&] { return launch->AllDone(); });
    done = launch->done;
  }
  std::string stuck;
  for (int rank = 0; rank < workers; ++rank) {
    if (done[static_cast<size_t>(rank)]) {
      threads[static_cast<size_t>(rank)].join();
    } else {
      threads[static_cast<size_t>(rank)].detach();
      stuck += (stuck.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  if (!stuck.empty()) {
    std::ostringstream suffix;
    suffix << "; worker(s) " << stuck << " did not stop within " << options.stop_grace_s
           << " s of the failure and were abandoned, still running (end the process)";
    launch->failure.ThrowIfAny(suffix.str());
  }
  launch->failure.ThrowIfAny();
}

// Open MPI, MPICH/Hydra and PMIx launchers (including Slurm's) each set one.
bool StartedByMpiLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

void LaunchMpi(Device device, const LaunchOptions& options,
               const std::function<void(Worker&)>& fn) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Without mpirun, MPI would quietly start a world of one process.
  TANDEM_CHECK(initialized || StartedByMpiLauncher())
      << "--mode=mpi needs the program started by mpirun (e.g. mpirun -np 4 "
         "<program> --mode=mpi); to run workers as threads of one process "
         "use --mode=threads --workers=N";
  MpiRuntime runtime;  // leaves MPI alone if the caller already started it
  MpiCommunicator comm;
  comm.set_timeout(TimeoutOf(options));
  comm.set_check_fingerprints(options.check_collectives);
  // One GPU per rank: the node-local rank picks among the visible GPUs.
  const Device mine =
      device.is_cuda() ? Device::Cuda(comm.local_rank() % CudaDeviceCount()) : device;
  Worker worker{comm.rank(), comm.size(), mine, comm, nullptr, {}};
#ifdef TANDEM_WITH_CUDA
  // Destroyed before `comm` and `runtime`: their bootstrap ran over them.
  std::vector<std::unique_ptr<NcclCommunicator>> nccl;  // one per lane
#endif
  std::string message;
  try {
    BindThreadToDevice(mine);
#ifdef TANDEM_WITH_CUDA
    if (mine.is_cuda()) {
      // Rank 0 makes each lane's NCCL id and broadcasts it over MPI.
      for (int lane = 0; lane < options.gradient_lanes; ++lane) {
        nccl.push_back(NcclCommunicator::Create(comm, mine.index));
        nccl.back()->set_timeout(TimeoutOf(options));
        if (options.check_collectives) nccl.back()->set_check_fingerprints(&comm);
        worker.device_lanes.push_back(nccl.back().get());
      }
      worker.device_comm = worker.device_lanes[0];
    }
#endif
    fn(worker);
    return;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception (not derived from std::exception)";
  }
  // The other ranks may be inside a collective that no one can interrupt.
  comm.Abort("rank " + std::to_string(worker.rank) + " failed: " + message);
}

}  // namespace

void Launch(const LaunchOptions& options,
            const std::function<void(Worker&)>& fn) {
  const bool threads = options.mode == "threads";
  TANDEM_CHECK(threads || options.mode == "mpi")
      << "--mode=" << options.mode
      << " is not a launch mode: use --mode=threads or --mode=mpi";
  TANDEM_CHECK(options.collective_timeout_s > 0)
      << "--collective_timeout must be positive, got " << options.collective_timeout_s;
  TANDEM_CHECK(options.gradient_lanes >= 1)
      << "--gradient_lanes must be at least 1, got " << options.gradient_lanes;
  const Device device = ResolveDevice(options.device);
  if (threads) {
    const int workers = options.workers.value_or(1);
    TANDEM_CHECK(workers >= 1)
        << "--workers=" << workers << ": need at least 1 worker";
    TANDEM_CHECK(device.is_cpu() || workers <= CudaDeviceCount())
        << "--workers=" << workers << " but only " << CudaDeviceCount()
        << " CUDA device(s) are visible (threads mode puts one worker on each GPU)";
    LaunchThreads(workers, device, options, fn);
  } else {
    TANDEM_CHECK(!options.workers.has_value())
        << "--workers cannot be used with --mode=mpi; the world size comes "
           "from mpirun (-np)";
    LaunchMpi(device, options, fn);
  }
}

}  // namespace tandem
