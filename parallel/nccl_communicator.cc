#include "parallel/nccl_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/event.h"
#include "core/cuda/stream.h"
#include "parallel/collective_fingerprint.h"
#include "parallel/nccl_check.h"

namespace tandem {

// Note [Stream order]
// ~~~~~~~~~~~~~~~~~~~
// Everything a device computes runs on its one compute stream
// (cuda::ComputeStream). Each NcclCommunicator owns a second stream on its
// device, so that communication can overlap computation, and the two are
// ordered only where we say so, with cuda::StreamWaitFor (an event recorded
// on one stream, waited for by the other; the host never blocks for it).
//
// The hot path, AllReduceOnStream, orders nothing itself: its caller knows
// when a bucket's gradients are complete, makes the communication stream wait
// for the compute stream at that point, queues the all-reduce, and later
// makes the compute stream (the optimizer) wait for the communication stream.
// QueueAllReduce and JoinQueued are exactly those two waits around it, for
// the reducer (Note [Queued all-reduce] in reducer.cc). RunQueued's work (the
// reducer's per-bucket updates) goes to a third stream, which waits for the
// communication stream (and the compute stream) at that point: the update of
// one bucket then runs beside the all-reduce of the next instead of in front
// of it. JoinQueued waits for both. On 2 H200s that took mlp-large's step at
// batch 512 from 4.20-4.22 to 4.17-4.18 ms, the last bucket's all-reduce no
// longer queued behind the update of the bucket before it.
//
// The Communicator interface's calls (AllReduce, Broadcast, AllGather) are for
// the edges of training: broadcasting the initial parameters, averaging
// metrics. Their callers write `data` with ops on the compute stream and read
// the result with ops queued afterwards, as with any other op. So each call
//   1. makes the communication stream wait for the compute stream: the
//      collective reads what the ops queued so far wrote;
//   2. queues the NCCL collective on the communication stream;
//   3. makes the compute stream wait for the communication stream: ops queued
//      later read (or overwrite) `data` only after the collective is done;
//   4. waits on the host until the communication stream is idle.
// Step 4 gives these calls the meaning they have on every other
// Communicator, "the result is in place when the call returns" (a host copy
// made at once is right, the buffer may be freed, a failure surfaces in this
// call and not in some later one), at a cost that does not matter off the hot
// path. The host waits by polling (cudaStreamQuery) rather than inside
// cudaStreamSynchronize, so that it notices Abort and NCCL's asynchronous
// errors and can give up; see Note [Abort]. Since the communication stream
// waited for the compute stream in step 1, the compute work queued before
// the call has finished too when it returns.
//
// Barrier skips steps 1 and 3: it reads and writes only its own scratch
// float, so it need not wait for the compute stream, and returning only
// after the all-reduce completed on every rank is what makes it a barrier.

// Note [Abort]
// ~~~~~~~~~~~~
// An NCCL kernel waits on the GPU for its peers' data. If a rank fails and
// never issues the collective, the others' kernels (and any host thread
// waiting for them) would wait forever. ncclCommAbort sets the flag those
// kernels and NCCL's own host-side waits poll, so they give up, and then
// releases the communicator.
//
// Releasing is the hazard: NCCL calls are not safe against another thread
// freeing their communicator. So every NCCL call on comm_ runs under
// call_mu_, and Abort first sets aborted_ and then takes call_mu_ before
// ncclCommAbort: a call that starts afterwards sees aborted_ and throws
// instead of touching the freed communicator. Blocking calls wait for the GPU
// by polling with call_mu_ released between polls (WaitForStream), so an
// abort from another thread gets the mutex within microseconds and the
// waiting thread throws CollectiveAbortedError at its next poll.
//
// One NCCL call can itself wait on the host for peers: a rank's first
// collective of a kind sets up its connections to the peers (NCCL's runtime
// connection, on by default), which needs the peers to make the same call.
// If a peer never does, that call does not return by itself, and holds
// call_mu_. Abort therefore waits for call_mu_ only kAbortWaitForCall, then
// calls ncclCommAbort anyway: NCCL's connection setup polls the abort flag
// and returns, which is how NCCL means a stuck call to be freed from another
// thread. That is the one case where the communicator is released while the
// stuck thread is still returning from NCCL.

// Note [Symmetric memory]
// ~~~~~~~~~~~~~~~~~~~~~~~
// NCCL 2.27 added symmetric memory: a buffer from ncclMemAlloc registered on
// every rank with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), at the
// same offset everywhere. Collectives on it run NCCL's symmetric kernels,
// which read the peers' buffers directly over NVLink instead of staging
// through NCCL's own FIFOs. The reducer's buckets live there
// (NewReduceBuffer). Measured on 2 H200s (bench/nccl_register_bench,
// gpu_dp_bench; docs/benchmarks.md, session 6):
// - Left to itself NCCL runs its RSxLD_AGxST kernel on 7 CTAs there: alone,
//   235 MB took 0.93 ms against 0.79 ms from ordinary memory, but beside
//   backward it already helped, mlp-large's step at batch 512 going from
//   4.17 to 4.10 ms, and with gradients first (Note [Gradients first] in
//   reducer.cc) from 4.07 to 3.99 ms.
// - On 7 CTAs the all-reduces beside backward's GEMMs fell behind: a
//   bucket's all-reduce queued behind the one before it. With at least
//   kMinCtas = 16 (ncclConfig_t::minCTAs), the SMs the reducer's GEMM
//   reserve leaves free anyway (Note [GEMM reserve] in reducer.cc), the step
//   took 3.93 ms (12 gave the same, 8 as both bounds 3.98 ms), and 235 MB
//   alone 0.70 ms against 0.79 ms from ordinary memory.
// - In one call with everything else on: 3.93 ms, against 4.07 ms with the
//   buckets in ordinary memory; the small model 0.221 against 0.240 ms.
// Registration is collective, so every rank makes the same buffers in the
// same order (the reducer does). Deregistering is local: a buffer dropped
// after its communicator is gone is only freed, since ncclCommDestroy and
// ncclCommAbort release the windows themselves. TANDEM_NCCL_SYMMETRIC=0
// turns it off, for comparison or for an NCCL that cannot register.

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kAbortWaitForCall{2};

ncclRedOp_t ToNccl(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : ncclAvg;
}

// NCCL_VERSION_CODE from 2.9 on is major * 10000 + minor * 100 + patch.
std::string VersionText(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) +
         "." + std::to_string(code % 100);
}

// For destructors and Abort, which must not throw.
void LogIfNcclError(ncclResult_t result, const char* call,
                    const std::string& context) {
  if (result == ncclSuccess) return;
  std::fprintf(stderr, "tandem: %s: ignoring %s in %s\n", context.c_str(),
               internal::NcclErrorText(result).c_str(), call);
}

// Blocking, and kMinCtas to kMaxCtas CTAs per collective unless the
// environment sets either (NCCL_MIN_CTAS, NCCL_MAX_CTAS, for experiments).
// NCCL 2.28.3 refuses a config that sets one bound without the other.
ncclConfig_t CommConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  if (std::getenv("NCCL_MIN_CTAS") == nullptr && std::getenv("NCCL_MAX_CTAS") == nullptr) {
    config.minCTAs = NcclCommunicator::kMinCtas;
    config.maxCTAs = NcclCommunicator::kMaxCtas;
  }
  return config;
}

std::string DeviceList(const std::vector<int>& devices) {
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    text += (i == 0 ? "cuda:" : ", cuda:") + std::to_string(devices[i]);
  }
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------
// NcclCommunicator

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size,
                                   int device)
    : comm_(comm), rank_(rank), size_(size), device_(device) {
  NCCL_CHECK(ncclGetVersion(&nccl_version_));
  const char* symmetric = std::getenv("TANDEM_NCCL_SYMMETRIC");
  symmetric_memory_ = nccl_version_ >= 22700 && size_ > 1 &&
                      !(symmetric != nullptr && std::string(symmetric) == "0");
  windows_ = std::make_shared<WindowOwner>();
  windows_->comm = comm_;
  windows_->call_mu = &call_mu_;
  cuda::DeviceGuard guard(device);
  int least = 0;
  int greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  stream_ = std::make_unique<cuda::Stream>(greatest);
  after_stream_ = std::make_unique<cuda::Stream>(greatest);
  event_ = std::make_unique<cuda::Event>();
  CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)))
      << "allocating the barrier's scratch float on cuda:" << device;
  const cudaError_t zeroed = cudaMemset(scratch_, 0, sizeof(float));
  if (zeroed != cudaSuccess) {
    cudaFree(scratch_);
    scratch_ = nullptr;
    CUDA_CHECK(zeroed) << "clearing the barrier's scratch float on cuda:"
                       << device;
  }
}

NcclCommunicator::~NcclCommunicator() {
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess &&
                        previous != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  // Buffers that outlive us are not deregistered: ncclCommDestroy (or
  // ncclCommAbort) releases their windows.
  DetachWindows();
  if (!aborted_.load()) {
    // All-reduces queued by AllReduceOnStream may still be running; NCCL
    // must not free what they use.
    TANDEM_CUDA_LOG_IF_ERROR(cudaStreamSynchronize(stream_->get()));
    TANDEM_CUDA_LOG_IF_ERROR(cudaStreamSynchronize(after_stream_->get()));
    LogIfNcclError(ncclCommDestroy(comm_), "ncclCommDestroy", Describe());
  }
  // After Abort, ncclCommAbort has released the communicator already.
  if (scratch_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaFree(scratch_));
  event_.reset();
  after_stream_.reset();
  stream_.reset();
  if (switched) TANDEM_CUDA_LOG_IF_ERROR(cudaSetDevice(previous));
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::Create(Communicator& host,
                                                           int device) {
  const ncclUniqueId id = BroadcastNcclUniqueId(host);
  ncclComm_t comm = nullptr;
  {
    cuda::DeviceGuard guard(device);
    ncclConfig_t config = CommConfig();
    NCCL_CHECK(
        ncclCommInitRankConfig(&comm, host.size(), id, host.rank(), &config))
        << "creating NCCL rank " << host.rank() << " of " << host.size()
        << " on cuda:" << device << " (host communicator "
        << host.Describe()
        << "; every rank of a node needs a GPU of its own)";
  }
  try {
    return std::unique_ptr<NcclCommunicator>(
        new NcclCommunicator(comm, host.rank(), host.size(), device));
  } catch (...) {
    LogIfNcclError(ncclCommAbort(comm), "ncclCommAbort",
                   "NcclCommunicator::Create");
    throw;
  }
}

cudaStream_t NcclCommunicator::stream() const { return stream_->get(); }

std::string NcclCommunicator::Describe() const {
  return "NcclCommunicator(rank " + std::to_string(rank_) + " of " +
         std::to_string(size_) + ", cuda:" + std::to_string(device_) +
         ", NCCL " + VersionText(nccl_version_) + ")";
}

std::string NcclCommunicator::Context(const char* kind, int64_t count,
                                      const std::string& detail) const {
  std::string text = Describe() + ": " + kind + " #" +
                     std::to_string(sequence_) + " (" +
                     std::to_string(count * static_cast<int64_t>(sizeof(float))) +
                     " bytes";
  if (!detail.empty()) text += ", " + detail;
  return text + ")";
}

void NcclCommunicator::ThrowIfAborted() const {
  if (!aborted_.load()) return;
  std::lock_guard<std::mutex> lock(reason_mu_);
  throw CollectiveAbortedError("collective aborted: " + abort_reason_);
}

void NcclCommunicator::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true);
  }
  DetachWindows();  // before call_mu_: a release takes the two in that order
  // See Note [Abort].
  std::unique_lock<std::timed_mutex> call(call_mu_, std::defer_lock);
  if (!call.try_lock_for(kAbortWaitForCall)) {
    std::fprintf(stderr,
                 "tandem: %s: an NCCL call is still waiting for the other "
                 "ranks; aborting under it (see Note [Abort])\n",
                 Describe().c_str());
  }
  LogIfNcclError(ncclCommAbort(comm_), "ncclCommAbort", Describe());
}

template <typename Call>
void NcclCommunicator::Issue(const char* kind, int64_t count,
                             const std::string& detail, Call call) {
  ncclResult_t result = ncclSuccess;
  {
    std::lock_guard<std::timed_mutex> lock(call_mu_);
    ThrowIfAborted();
    result = call();
  }
  if (result == ncclSuccess) return;
  ThrowIfAborted();  // the call failed because another thread aborted
  NCCL_CHECK(result) << Context(kind, count, detail);
}

template <typename Enqueue>
void NcclCommunicator::RunBlocking(const char* kind, int64_t count,
                                   const std::string& detail,
                                   bool after_compute, Enqueue enqueue) {
  // See Note [Stream order].
  cuda::DeviceGuard guard(device_);
  const cudaStream_t comm_stream = stream_->get();
  cudaStream_t compute = nullptr;
  if (after_compute) {
    compute = cuda::ComputeStream(device_);
    cuda::StreamWaitFor(comm_stream, compute, *event_);
  }
  Issue(kind, count, detail, [&] { return enqueue(comm_stream); });
  if (after_compute) cuda::StreamWaitFor(compute, comm_stream, *event_);
  WaitForStream(kind, count, detail);
}

void NcclCommunicator::WaitForStream(const char* kind, int64_t count,
                                     const std::string& detail) {
  const Clock::time_point start = Clock::now();
  while (true) {
    const cudaError_t status = cudaStreamQuery(stream_->get());
    if (status == cudaSuccess) {
      // An aborted kernel also ends the stream's work, with garbage results.
      ThrowIfAborted();
      return;
    }
    if (status != cudaErrorNotReady) {
      ThrowIfAborted();
      CUDA_CHECK(status) << Context(kind, count, detail);
    }
    // "Not ready" is not an error; don't leave it for the next launch check.
    if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();

    ncclResult_t async = ncclSuccess;
    ncclResult_t query = ncclSuccess;
    {
      std::lock_guard<std::timed_mutex> lock(call_mu_);
      ThrowIfAborted();
      query = ncclCommGetAsyncError(comm_, &async);
    }
    NCCL_CHECK(query) << Context(kind, count, detail);
    if (async != ncclSuccess && async != ncclInProgress) {
      // NCCL's rule: after an asynchronous error the communicator is unusable
      // and must be aborted.
      const std::string message = Context(kind, count, detail) + ": " +
                                  internal::NcclErrorText(async) +
                                  " (reported asynchronously)";
      Abort(message);
      throw Error(message);
    }

    const Clock::duration waited = Clock::now() - start;
    if (waited > timeout_) {
      const std::string message =
          Context(kind, count, detail) + " did not complete within " +
          std::to_string(timeout_.count()) +
          " ms: a rank may have skipped this collective or died (every rank "
          "must issue the same collectives in the same order)";
      Abort(message);
      throw Error(message);
    }
    // Collectives off the hot path take microseconds to milliseconds: spin
    // politely first, then sleep, so a long wait costs no core.
    if (waited < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void NcclCommunicator::BeginCollective(const char* kind, int64_t count) {
  ++sequence_;
  if (fingerprint_host_ != nullptr) {
    CheckFingerprint(*fingerprint_host_,
                     {static_cast<int64_t>(sequence_), FingerprintKind(kind), count});
  }
}

void NcclCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  BeginCollective("AllReduce", count);
  TANDEM_CHECK(count >= 0) << Context("AllReduce", count, ToString(op))
                           << ": the count must not be negative";
  ThrowIfAborted();
  if (count == 0) return;
  RunBlocking("AllReduce", count, ToString(op), /*after_compute=*/true,
              [&](cudaStream_t stream) {
                return ncclAllReduce(data, data, static_cast<size_t>(count),
                                     ncclFloat, ToNccl(op), comm_, stream);
              });
}

void NcclCommunicator::AllReduceOnStream(float* data, int64_t count,
                                         ReduceOp op, cudaStream_t stream) {
  BeginCollective("AllReduce", count);
  TANDEM_CHECK(count >= 0) << Context("AllReduce", count, ToString(op))
                           << ": the count must not be negative";
  ThrowIfAborted();
  if (count == 0) return;
  cuda::DeviceGuard guard(device_);
  Issue("AllReduce", count, ToString(op), [&] {
    return ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat,
                         ToNccl(op), comm_, stream);
  });
}

void NcclCommunicator::QueueAllReduce(float* data, int64_t count,
                                      ReduceOp op) {
  ThrowIfAborted();
  if (count <= 0) {  // AllReduceOnStream counts it and checks the sign
    AllReduceOnStream(data, count, op, stream_->get());
    return;
  }
  cuda::DeviceGuard guard(device_);
  // The gradients may come from either lane of the compute context (Linear
  // writes them on the side lane); waiting here for both, rather than making
  // the compute stream join the side lane, leaves backward running.
  WaitForComputeContext(stream_->get());
  QueuedSpan span;
  if (record_queue_times_) span.start = cuda::MarkStream(stream_->get(), device_);
  AllReduceOnStream(data, count, op, stream_->get());
  if (record_queue_times_) {
    span.end = cuda::MarkStream(stream_->get(), device_);
    queued_spans_.push_back(std::move(span));
  }
}

Tensor NcclCommunicator::NewReduceBuffer(int64_t count, Device device) {
  TANDEM_CHECK(device == Device::Cuda(device_))
      << Describe() << ": a reduce buffer on " << device
      << " (this communicator reduces memory of cuda:" << device_ << ")";
  if (!symmetric_memory_ || count <= 0) {
    return Communicator::NewReduceBuffer(count, device);
  }
  // See Note [Symmetric memory].
  cuda::DeviceGuard guard(device_);
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  void* ptr = nullptr;
  const char* way_out = "TANDEM_NCCL_SYMMETRIC=0 on every rank uses ordinary memory";
  NCCL_CHECK(ncclMemAlloc(&ptr, bytes))
      << Describe() << ": allocating a " << bytes << "-byte reduce buffer in symmetric memory ("
      << way_out << ")";
  ncclWindow_t window = nullptr;
  try {
    // On the compute stream, which the all-reduces wait for, so no wait here.
    CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, cuda::ComputeStream(device_)))
        << Describe() << ": clearing a reduce buffer";
    BeginCollective("WindowRegister", count);
    Issue("WindowRegister", count, way_out, [&] {
      return ncclCommWindowRegister(comm_, ptr, bytes, &window, NCCL_WIN_COLL_SYMMETRIC);
    });
  } catch (...) {
    LogIfNcclError(ncclMemFree(ptr), "ncclMemFree", Describe());
    throw;
  }
  std::shared_ptr<WindowOwner> owner = windows_;
  const int device_index = device_;
  const std::string name = Describe();
  auto release = [owner, ptr, window, device_index, name] {
    int previous = -1;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess &&
                          previous != device_index &&
                          cudaSetDevice(device_index) == cudaSuccess;
    // Kernels queued on any stream (all-reduces, updates, GEMMs writing
    // gradients) may still use the buffer; this runs when a model or reducer
    // is torn down, never inside a step.
    TANDEM_CUDA_LOG_IF_ERROR(cudaDeviceSynchronize());
    {
      std::lock_guard<std::mutex> lock(owner->mu);
      if (owner->comm != nullptr) {
        // A local call (unlike its registration): checked on 2 H200s,
        // bench/nccl_register_bench --probe_deregister.
        std::lock_guard<std::timed_mutex> call(*owner->call_mu);
        LogIfNcclError(ncclCommWindowDeregister(owner->comm, window),
                       "ncclCommWindowDeregister", name);
      }
    }
    LogIfNcclError(ncclMemFree(ptr), "ncclMemFree", name);
    if (switched) TANDEM_CUDA_LOG_IF_ERROR(cudaSetDevice(previous));
  };
  return Tensor::Wrap(static_cast<float*>(ptr), {count}, device, release);
}

void NcclCommunicator::DetachWindows() {
  std::lock_guard<std::mutex> lock(windows_->mu);
  windows_->comm = nullptr;
  windows_->call_mu = nullptr;
}

std::vector<Communicator::QueuedSpan> NcclCommunicator::TakeQueuedSpans() {
  std::vector<QueuedSpan> spans = std::move(queued_spans_);
  queued_spans_.clear();
  return spans;
}

void NcclCommunicator::JoinQueued() {
  ThrowIfAborted();
  cuda::DeviceGuard guard(device_);
  cuda::StreamWaitFor(cuda::ComputeStream(device_), stream_->get(), *event_);
  cuda::StreamWaitFor(cuda::ComputeStream(device_), after_stream_->get(), *event_);
}

void NcclCommunicator::WaitForComputeContext(cudaStream_t stream) {
  cuda::StreamWaitFor(stream, cuda::ComputeStream(device_), *event_);
  cuda::StreamWaitFor(stream, cuda::SideLaneStream(device_), *event_);
}

void NcclCommunicator::RunQueued(const std::function<void()>& work) {
  ThrowIfAborted();
  cuda::DeviceGuard guard(device_);
  // See Note [Stream order]: behind the collectives queued so far and
  // everything queued so far on the compute context, beside what comes next.
  const cudaStream_t after = after_stream_->get();
  cuda::StreamWaitFor(after, stream_->get(), *event_);
  WaitForComputeContext(after);
  cuda::StreamOverride on_after_stream(device_, after);
  work();
}

void NcclCommunicator::Broadcast(float* data, int64_t count, int root) {
  BeginCollective("Broadcast", count);
  const std::string detail = "root " + std::to_string(root);
  TANDEM_CHECK(count >= 0) << Context("Broadcast", count, detail)
                           << ": the count must not be negative";
  TANDEM_CHECK(root >= 0 && root < size_)
      << Context("Broadcast", count, detail) << ": root " << root
      << " is not a rank";
  ThrowIfAborted();
  if (count == 0) return;
  RunBlocking("Broadcast", count, detail, /*after_compute=*/true,
              [&](cudaStream_t stream) {
                return ncclBroadcast(data, data, static_cast<size_t>(count),
                                     ncclFloat, root, comm_, stream);
              });
}

void NcclCommunicator::Barrier() {
  BeginCollective("Barrier", 0);
  ThrowIfAborted();
  RunBlocking("Barrier", 0, "", /*after_compute=*/false,
              [&](cudaStream_t stream) {
                return ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum,
                                     comm_, stream);
              });
}

void NcclCommunicator::AllGather(const float* send, int64_t count_per_rank,
                                 float* recv) {
  BeginCollective("AllGather", count_per_rank);
  TANDEM_CHECK(count_per_rank >= 0)
      << Context("AllGather", count_per_rank, "")
      << ": the count must not be negative";
  ThrowIfAborted();
  if (count_per_rank == 0) return;
  const float* in_place = recv + rank_ * count_per_rank;
  TANDEM_CHECK(send == in_place || send + count_per_rank <= recv ||
               send >= recv + size_ * count_per_rank)
      << Context("AllGather", count_per_rank, "")
      << ": send overlaps recv without being this rank's block of it (recv + "
      << rank_ << " * " << count_per_rank << ")";
  RunBlocking("AllGather", count_per_rank, "", /*after_compute=*/true,
              [&](cudaStream_t stream) {
                return ncclAllGather(send, recv,
                                     static_cast<size_t>(count_per_rank),
                                     ncclFloat, comm_, stream);
              });
}

// ---------------------------------------------------------------------------
// NcclThreadGroup

NcclThreadGroup::NcclThreadGroup(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  TANDEM_CHECK(n >= 1) << "NcclThreadGroup needs at least one device";
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < r; ++q) {
      TANDEM_CHECK(devices[q] != devices[r])
          << "NcclThreadGroup: ranks " << q << " and " << r
          << " are both on cuda:" << devices[r]
          << "; NCCL needs a GPU of its own for each rank";
    }
  }
  // Every rank is initialised from this thread in one NCCL group (what
  // ncclCommInitAll does, here with our ncclConfig_t), so either all ranks
  // exist or the call fails: no rank waits for one that never joined.
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id)) << "making the NCCL id for " << DeviceList(devices);
  ncclResult_t created = ncclGroupStart();
  for (int r = 0; r < n && created == ncclSuccess; ++r) {
    cuda::DeviceGuard guard(devices[r]);
    ncclConfig_t config = CommConfig();
    created = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (created == ncclSuccess) created = ended;
  if (created != ncclSuccess) {
    for (ncclComm_t comm : comms) {
      if (comm != nullptr) {
        LogIfNcclError(ncclCommAbort(comm), "ncclCommAbort", "NcclThreadGroup");
      }
    }
  }
  NCCL_CHECK(created) << "creating an NCCL communicator of " << n << " ranks on "
                      << DeviceList(devices);
  communicators_.reserve(n);
  int wrapped = 0;
  try {
    for (; wrapped < n; ++wrapped) {
      communicators_.emplace_back(
          new NcclCommunicator(comms[wrapped], wrapped, n, devices[wrapped]));
    }
  } catch (...) {
    for (auto& communicator : communicators_) {
      communicator->Abort("NcclThreadGroup could not be created");
    }
    for (int r = wrapped; r < n; ++r) {
      LogIfNcclError(ncclCommAbort(comms[r]), "ncclCommAbort",
                     "NcclThreadGroup");
    }
    throw;
  }
}

NcclThreadGroup::~NcclThreadGroup() {
  // Rank by rank from one thread is how NCCL expects the ranks of one
  // process to be destroyed: the last ncclCommDestroy finishes them all.
  communicators_.clear();
}

NcclCommunicator& NcclThreadGroup::communicator(int rank) {
  TANDEM_CHECK(rank >= 0 && rank < size())
      << "NcclThreadGroup of " << size() << " ranks has no rank " << rank;
  return *communicators_[rank];
}

void NcclThreadGroup::Abort(const std::string& reason) {
  for (auto& communicator : communicators_) communicator->Abort(reason);
}

// ---------------------------------------------------------------------------

ncclUniqueId BroadcastNcclUniqueId(Communicator& host) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  unsigned char bytes[sizeof(id.internal)] = {};
  std::vector<float> wire(sizeof(id.internal), 0.f);
  if (host.rank() == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id))
        << "making the NCCL id on rank 0 of " << host.Describe();
    std::memcpy(bytes, id.internal, sizeof(bytes));
    for (size_t i = 0; i < wire.size(); ++i) wire[i] = bytes[i];
  }
  host.Broadcast(wire.data(), static_cast<int64_t>(wire.size()), /*root=*/0);
  for (size_t i = 0; i < wire.size(); ++i) {
    bytes[i] = static_cast<unsigned char>(wire[i]);
  }
  std::memcpy(id.internal, bytes, sizeof(bytes));
  return id;
}

}  // namespace tandem
