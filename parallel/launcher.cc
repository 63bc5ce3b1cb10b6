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
#include "core/cpu/cpu_threads.h"
#include "parallel/device_communicators.h"
#include "parallel/mpi_communicator.h"
#include "parallel/thread_communicator.h"

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
  ThreadLaunch(int workers, int data_threads, const std::function<void(Worker&)>& fn)
      : group(workers, data_threads), fn(fn), done(static_cast<size_t>(workers), false) {}
  ThreadGroup group;
  std::unique_ptr<DeviceGroup> devices;  // workers on GPUs only
  FirstFailure failure;
  const std::function<void(Worker&)> fn;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<bool> done;  // guarded by mu

  bool AllDone() const {  // requires mu
    return std::find(done.begin(), done.end(), false) == done.end();
  }

  // Gives up on the host group and, on GPUs, on the device communicators
  // too: their kernels would otherwise wait on the device for the failed
  // worker forever.
  void AbortAll(const std::string& reason) {
    group.Abort(reason);
    if (devices != nullptr) devices->Abort(reason);
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
  if (l.devices != nullptr) {
    worker.device_comms = l.devices->comms(rank);
    worker.device_comm = worker.device_comms.front();
    // Each rank compares its device collectives over its host communicator.
    if (options.check_collectives) {
      for (Communicator* lane : worker.device_comms) lane->set_fingerprint_channel(&worker.comm);
    }
  }
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

// Workers on GPUs also get device communicators (worker i on cuda:i, as in
// RunWorker), all made here before any thread starts: a rank made later
// would leave the others waiting in initialisation.
std::unique_ptr<DeviceGroup> MakeDeviceGroup(int workers, const LaunchOptions& options) {
  std::vector<int> gpus(static_cast<size_t>(workers));
  for (int rank = 0; rank < workers; ++rank) gpus[static_cast<size_t>(rank)] = rank;
  DeviceCommOptions device_options;
  device_options.timeout = TimeoutOf(options);
  return MakeThreadDeviceGroup(gpus, options.gradient_comms, device_options);
}

std::vector<std::thread> StartWorkers(const std::shared_ptr<ThreadLaunch>& launch, int workers,
                                      Device device, const LaunchOptions& options) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
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
  return threads;
}

// Every worker returns, or one fails and the rest get stop_grace_s to
// follow (Note [Stuck workers]); then reports the first failure.
void JoinWorkers(const std::shared_ptr<ThreadLaunch>& launch, std::vector<std::thread>& threads,
                 const LaunchOptions& options) {
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
  for (size_t rank = 0; rank < threads.size(); ++rank) {
    if (done[rank]) {
      threads[rank].join();
    } else {
      threads[rank].detach();
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

void LaunchThreads(int workers, Device device, const LaunchOptions& options,
                   const std::function<void(Worker&)>& fn) {
  // CPU workers sum their all-reduces on their intra-op threads too.
  const int data_threads = device.is_cpu() ? cpu::CpuThreads() : 1;
  auto launch = std::make_shared<ThreadLaunch>(workers, data_threads, fn);
  launch->group.set_timeout(TimeoutOf(options));
  if (device.is_cuda()) launch->devices = MakeDeviceGroup(workers, options);
  std::vector<std::thread> threads = StartWorkers(launch, workers, device, options);
  JoinWorkers(launch, threads, options);
}

}  // namespace

int LauncherWorldRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* rank = std::getenv(name);
    if (rank != nullptr) return std::atoi(rank);
  }
  return 0;
}

namespace {

// Open MPI, MPICH/Hydra and PMIx launchers (including Slurm's) each set one.
bool StartedByMpiLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// This rank's device communicators, bootstrapped over `host`; with
// check_collectives on they compare their collectives over it.
std::vector<std::unique_ptr<Communicator>> MakeRankDevices(MpiCommunicator& host, Device device,
                                                           const LaunchOptions& options) {
  DeviceCommOptions device_options;
  device_options.timeout = TimeoutOf(options);
  if (options.check_collectives) device_options.fingerprint_channel = &host;
  return MakeRankDeviceCommunicators(host, device.index, options.gradient_comms,
                                     device_options);
}

// NCCL needs a GPU of its own for every rank. The ranks agree on the verdict
// before any device communicator exists, so all of them throw this error
// (rather than the ranks without a GPU failing alone, and NCCL or MPI_Abort
// ending the rest).
void CheckGpuPerRank(MpiCommunicator& comm) {
  float without_gpu = comm.local_rank() < CudaDeviceCount() ? 0.f : 1.f;
  comm.AllReduce(&without_gpu, 1, ReduceOp::kSum)->Wait();
  TANDEM_CHECK(without_gpu == 0.f)
      << "--mode=mpi --device=cuda puts each rank on a GPU of its own, but "
      << static_cast<int>(without_gpu) << " rank(s) have none (rank " << comm.rank()
      << " is local rank " << comm.local_rank() << " of a node with " << CudaDeviceCount()
      << " visible CUDA device(s)): start at most as many ranks per node as it has GPUs";
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
  // Debug: the host communicator compares its collectives over a second one
  // (a communicator cannot carry its own fingerprints). Outlives `comm`.
  std::unique_ptr<MpiCommunicator> fingerprints;
  if (options.check_collectives) {
    fingerprints = std::make_unique<MpiCommunicator>();
    fingerprints->set_timeout(TimeoutOf(options));
  }
  MpiCommunicator comm;
  comm.set_timeout(TimeoutOf(options));
  comm.set_fingerprint_channel(fingerprints.get());
  // One GPU per rank: the node-local rank picks it.
  if (device.is_cuda()) CheckGpuPerRank(comm);
  const Device mine = device.is_cuda() ? Device::Cuda(comm.local_rank()) : device;
  if (mine.is_cpu()) cpu::SizeCpuThreadsForWorkers(comm.local_size());
  Worker worker{comm.rank(), comm.size(), mine, comm, nullptr, {}};
  // Destroyed before `comm` and `runtime`: their bootstrap ran over them.
  std::vector<std::unique_ptr<Communicator>> devices;
  std::string message;
  try {
    BindThreadToDevice(mine);
    if (mine.is_cuda()) {
      devices = MakeRankDevices(comm, mine, options);
      for (auto& lane : devices) worker.device_comms.push_back(lane.get());
      worker.device_comm = worker.device_comms.front();
    }
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

LaunchMode ParseLaunchMode(const std::string& text) {
  if (text == "threads") return LaunchMode::kThreads;
  if (text == "mpi") return LaunchMode::kMpi;
  throw Error("--mode=" + text + " is not a launch mode: use --mode=threads or --mode=mpi");
}

const char* ToString(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kThreads:
      return "threads";
    case LaunchMode::kMpi:
      return "mpi";
  }
  return "unknown";
}

void Launch(const LaunchOptions& options,
            const std::function<void(Worker&)>& fn) {
  const bool threads = options.mode == LaunchMode::kThreads;
  TANDEM_CHECK(threads || options.mode == LaunchMode::kMpi)
      << "LaunchOptions::mode holds " << static_cast<int>(options.mode)
      << ", not a launch mode: use --mode=threads or --mode=mpi";
  TANDEM_CHECK(options.collective_timeout_s > 0)
      << "--collective_timeout must be positive, got " << options.collective_timeout_s;
  TANDEM_CHECK(options.gradient_comms >= 1)
      << "--gradient_comms must be at least 1, got " << options.gradient_comms;
  TANDEM_CHECK(options.cpu_threads >= 0)
      << "--cpu_threads must be 0 (one thread per core and worker) or more, got "
      << options.cpu_threads;
  if (options.cpu_threads > 0) cpu::SetCpuThreads(options.cpu_threads);
  const Device device = ResolveDevice(options.device);
  if (threads) {
    const int workers = options.workers.value_or(1);
    TANDEM_CHECK(workers >= 1)
        << "--workers=" << workers << ": need at least 1 worker";
    TANDEM_CHECK(device.is_cpu() || workers <= CudaDeviceCount())
        << "--workers=" << workers << " but only " << CudaDeviceCount()
        << " CUDA device(s) are visible (threads mode puts one worker on each GPU)";
    // CPU workers share the cores: workers x intra-op threads <= cores.
    if (device.is_cpu()) cpu::SizeCpuThreadsForWorkers(workers);
    LaunchThreads(workers, device, options, fn);
  } else {
    TANDEM_CHECK(!options.workers.has_value())
        << "--workers cannot be used with --mode=mpi; the world size comes "
           "from mpirun (-np)";
    LaunchMpi(device, options, fn);
  }
}

}  // namespace tandem
