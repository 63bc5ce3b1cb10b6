// NcclCommunicator: a Communicator over GPU memory through NCCL, one rank per
// GPU. Ranks are threads of one process (NcclThreadGroup makes them all at
// once) or processes started by mpirun (NcclCommunicator::Create bootstraps
// over the host communicator). The launcher makes one for every worker on a
// GPU and hands it out as Worker::device_comm.
//
//   // Threads mode: one process, one thread per GPU.
//   NcclThreadGroup group({0, 1});          // ranks 0 and 1 on cuda:0, cuda:1
//   // ... in rank r's thread:
//   NcclCommunicator& comm = group.communicator(r);
//   comm.AllReduce(grads, n, ReduceOp::kAverage);   // device pointer; blocks
//
//   // Mpi mode: rank 0 makes the NCCL id and broadcasts it over MPI.
//   MpiCommunicator host;
//   auto comm = NcclCommunicator::Create(host, host.local_rank() % gpus);
//
//   // The reducer's hot path: queued, the host does not wait.
//   cuda::StreamWaitFor(comm.stream(), cuda::ComputeStream(d), ready);
//   comm.AllReduceOnStream(bucket, n, ReduceOp::kAverage, comm.stream());
//   cuda::StreamWaitFor(cuda::ComputeStream(d), comm.stream(), done);
//
// Every pointer is a device pointer on device(). See Note [Stream order] in
// nccl_communicator.cc for how collectives are ordered against the device's
// compute stream, and Note [Abort] for how a failed rank frees the others.
//
// Results. AllReduce writes the same bits on every rank (NCCL reduces each
// chunk once and copies it out), but the order of the sum is NCCL's and may
// change with message size, algorithm and NCCL version, so results need not
// match ThreadCommunicator's bitwise. kAverage is ncclAvg, which NCCL computes
// for floats by multiplying every input by 1/size() before summing: the same
// bits as sum * (1.0f / size()) whenever size() is a power of two (both
// scalings are exact), possibly the last bit off otherwise.
//
// NVLS (NVLink SHARP multicast) is left to NCCL's environment: nothing here
// sets or clears NCCL_NVLS_ENABLE; GPU machines that need it off set =0.
// Two NCCL settings are ours (Note [Symmetric memory] in the .cc): kMinCtas
// to kMaxCtas CTAs per collective (unless NCCL_MIN_CTAS or NCCL_MAX_CTAS is
// set), and the reducer's buckets in symmetric memory (unless
// TANDEM_NCCL_SYMMETRIC=0).
#ifndef TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_
#define TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tandem {

namespace cuda {
class Event;
class Stream;
}  // namespace cuda

class NcclCommunicator final : public Communicator {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300 * 1000};
  // ncclConfig_t::minCTAs of every communicator made here: as many SMs as
  // backward's GEMMs leave to NCCL (ReducerOptions::gemm_reserve). See
  // Note [Symmetric memory].
  static constexpr int kMinCtas = 16;
  // ncclConfig_t::maxCTAs: NCCL's own default on Hopper (NCCL_MAX_CTAS).
  static constexpr int kMaxCtas = 32;

  // One rank of a communicator spanning every rank of `host`: rank 0 of host
  // makes an ncclUniqueId, host broadcasts it (BroadcastNcclUniqueId), and
  // each rank joins with host.rank() and host.size() on GPU `device`.
  // Collective over host; every rank must pass a different device of its
  // node. Throws tandem::Error (naming the rank and device) on failure.
  static std::unique_ptr<NcclCommunicator> Create(Communicator& host,
                                                  int device);

  // Synchronises the communication stream and releases the communicator
  // (ncclCommDestroy; nothing more after Abort, whose ncclCommAbort already
  // released it). Never throws; logs failures to stderr.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // The Communicator interface, for calls outside the hot path (parameter
  // broadcast, metrics): each orders itself after the work queued on the
  // device's compute stream, orders later compute work after itself, and
  // returns once the result is in place. See Note [Stream order].
  void AllReduce(float* data, int64_t count, ReduceOp op) override;
  void Broadcast(float* data, int64_t count, int root) override;
  // An all-reduce of one float of device scratch, waited for on the host.
  // It orders nothing against the compute stream.
  void Barrier() override;
  void AllGather(const float* send, int64_t count_per_rank,
                 float* recv) override;
  // "NcclCommunicator(rank 1 of 2, cuda:1, NCCL 2.28.3)".
  std::string Describe() const override;
  // Gives up: releases the NCCL communicator with ncclCommAbort, which also
  // makes this rank's NCCL kernels still on the GPU exit; every later call
  // (and any blocking call waiting now) throws CollectiveAbortedError.
  // Callable from any thread, any number of times; the first reason is kept.
  // It aborts this rank only: to free the other ranks, abort theirs too (the
  // launcher does, in threads mode) or end their processes (mpi mode).
  void Abort(const std::string& reason) override;

  // The hot path: queues an in-place all-reduce of data[0, count) on
  // `stream` (a stream of device(), normally stream()) and returns at once.
  // The caller orders it: `stream` must already wait for whatever wrote
  // `data`, and readers of the result must wait for `stream`; `data` must
  // stay allocated until they have (Note [Stream-ordered reuse] in
  // core/cuda/caching_allocator.h). Throws CollectiveAbortedError after
  // Abort; other failures (a dead peer) surface in later blocking calls.
  void AllReduceOnStream(float* data, int64_t count, ReduceOp op,
                         cudaStream_t stream);

  // The Communicator interface's stream-ordered pair, on stream():
  // QueueAllReduce makes stream() wait for the work queued so far on the
  // device's compute stream, then AllReduceOnStream; JoinQueued makes the
  // compute stream's later work wait for everything queued on stream(). The
  // host never waits. See Note [Stream order].
  bool supports_queued() const override { return true; }
  void QueueAllReduce(float* data, int64_t count, ReduceOp op) override;
  void JoinQueued() override;
  void RunQueued(const std::function<void()>& work) override;
  // With symmetric_memory(): memory from ncclMemAlloc, registered as a
  // symmetric window (ncclCommWindowRegister), which NCCL all-reduces with
  // its symmetric kernels. Collective: every rank asks for the same counts
  // in the same order, like a collective. The buffer may outlive this
  // communicator; it is deregistered and freed, after the device has
  // finished its queued work, on the thread that drops the last tensor
  // viewing it (as with any call on a communicator, not while another thread
  // uses it). Otherwise, and for count 0, ordinary device memory.
  Tensor NewReduceBuffer(int64_t count, Device device) override;
  // NCCL 2.27 or newer, 2+ ranks, and TANDEM_NCCL_SYMMETRIC is not "0".
  bool symmetric_memory() const { return symmetric_memory_; }
  void set_record_queue_times(bool record) override { record_queue_times_ = record; }
  std::vector<QueuedSpan> TakeQueuedSpans() override;

  // This rank's communication stream: non-blocking, on device(), at the
  // highest priority the device offers, so communication kernels start
  // ahead of queued compute kernels.
  cudaStream_t stream() const;
  // The GPU of this rank.
  int device() const { return device_; }
  bool aborted() const { return aborted_.load(); }

  // How long a blocking call waits for its collective before it aborts this
  // rank and throws an error naming the collective.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // How many collectives this rank has started; errors number them from 1.
  uint64_t sequence() const { return sequence_; }

  // Debug mode: before each collective (the queued ones too) every rank
  // exchanges its (sequence number, kind, count) over `host` and, if any
  // rank differs, every rank throws naming who called what
  // (parallel/collective_fingerprint.h), instead of NCCL pairing mismatched
  // buffers or hanging on the GPU. Costs one host all-gather per collective,
  // and the host then waits for its peers at every queued collective. `host`
  // spans the same ranks (the one passed to Create) and must outlive this
  // communicator's use; nullptr turns the check off (the default).
  void set_check_fingerprints(Communicator* host) { fingerprint_host_ = host; }

 private:
  bool record_queue_times_ = false;
  std::vector<QueuedSpan> queued_spans_;
  friend class NcclThreadGroup;

  // Takes ownership of `comm` (rank `rank` of `size` on `device`) once it
  // returns; if it throws, the caller still owns `comm`.
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device);

  // "NcclCommunicator(...): AllReduce #3 (4000 bytes, sum)".
  std::string Context(const char* kind, int64_t count,
                      const std::string& detail) const;
  // Numbers the next collective and, in debug mode, checks that every rank
  // is issuing the same one (set_check_fingerprints).
  void BeginCollective(const char* kind, int64_t count);
  // Throws CollectiveAbortedError if Abort was called.
  void ThrowIfAborted() const;
  // Makes one NCCL call on comm_ under call_mu_ (see Note [Abort]) and turns
  // a failure into the right exception.
  template <typename Call>
  void Issue(const char* kind, int64_t count, const std::string& detail,
             Call call);
  // The blocking calls' frame around `enqueue(stream)`; see Note [Stream
  // order].
  template <typename Enqueue>
  void RunBlocking(const char* kind, int64_t count, const std::string& detail,
                   bool after_compute, Enqueue enqueue);
  // Waits on the host, without blocking inside CUDA, until the
  // communication stream is idle, checking for Abort, NCCL's asynchronous
  // errors and the timeout.
  void WaitForStream(const char* kind, int64_t count,
                     const std::string& detail);

  // What the reduce buffers handed out need of this communicator, shared with
  // them since they may outlive it: comm is null once it is destroyed or
  // aborted (which releases their windows).
  struct WindowOwner {
    std::mutex mu;
    ncclComm_t comm = nullptr;
    std::timed_mutex* call_mu = nullptr;  // the communicator's, while comm is set
  };
  // `stream` waits for everything queued so far on the device's compute
  // stream and its side lane (where layers put their gradients).
  void WaitForComputeContext(cudaStream_t stream);
  // Stops buffers released from now on from deregistering.
  void DetachWindows();

  ncclComm_t comm_;
  const int rank_;
  const int size_;
  const int device_;
  int nccl_version_ = 0;
  bool symmetric_memory_ = false;
  std::shared_ptr<WindowOwner> windows_;
  std::unique_ptr<cuda::Stream> stream_;
  // RunQueued's work (the per-bucket updates): behind the collectives it
  // follows, beside the later ones. See Note [Stream order].
  std::unique_ptr<cuda::Stream> after_stream_;
  std::unique_ptr<cuda::Event> event_;  // scratch for cuda::StreamWaitFor
  float* scratch_ = nullptr;            // [1] on device_, for Barrier
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
  // Only the owning thread touches it (calls on one communicator are
  // serialised, see communicator.h).
  uint64_t sequence_ = 0;
  Communicator* fingerprint_host_ = nullptr;

  // Held for the duration of each NCCL call on comm_; Abort takes it so it
  // does not free the communicator under a call. See Note [Abort].
  std::timed_mutex call_mu_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex reason_mu_;
  std::string abort_reason_;
};

// The ranks of one NCCL communicator as threads of this process, rank r on
// GPU devices[r]; created together, from the calling thread, before the
// threads that use them start (so no rank can be left waiting in
// initialisation for a thread that never came). Give communicator(r) to
// rank r's thread; the group must outlive those threads.
class NcclThreadGroup {
 public:
  // Throws tandem::Error if `devices` is empty, names a device twice (NCCL
  // needs one GPU per rank) or NCCL cannot create the communicators.
  explicit NcclThreadGroup(const std::vector<int>& devices);
  // Destroys the communicators (see ~NcclCommunicator); the threads using
  // them must have finished.
  ~NcclThreadGroup();
  NcclThreadGroup(const NcclThreadGroup&) = delete;
  NcclThreadGroup& operator=(const NcclThreadGroup&) = delete;

  int size() const { return static_cast<int>(communicators_.size()); }
  NcclCommunicator& communicator(int rank);

  // Aborts every rank's communicator (NcclCommunicator::Abort), so that no
  // rank stays inside NCCL waiting for one that failed. Callable from any
  // thread.
  void Abort(const std::string& reason);

 private:
  std::vector<std::unique_ptr<NcclCommunicator>> communicators_;
};

// Rank 0 of `host` makes an ncclUniqueId (ncclGetUniqueId) and every rank
// returns a copy, sent through host.Broadcast with each byte as one float
// (exact, whatever the transport does with NaN bit patterns). Collective
// over host. Needs no GPU.
ncclUniqueId BroadcastNcclUniqueId(Communicator& host);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_
