// NcclCommunicator: a Communicator over GPU memory through NCCL, one rank per
// GPU. Ranks are threads of one process (NcclThreadGroup, in
// nccl_thread_group.h, makes them all at once) or processes started by
// mpirun (Create bootstraps over the host communicator). Code outside
// parallel/'s NCCL files gets them from parallel/device_communicators.h and
// never names NCCL.
//
//   MpiCommunicator host;
//   auto comm = NcclCommunicator::Create(host, host.local_rank() % gpus);
//   Lane main = GetBackend(Device::Cuda(0)).main_lane();
//   // The reducer's hot path: queued, the host does not wait.
//   auto work = comm->AllReduce(bucket, n, ReduceOp::kAverage, {{main}});
//   work->WaitOn(main);            // main's later kernels see the result
//   // Off the hot path: the host waits, as on every other transport.
//   comm->Broadcast(params, n, /*root=*/0)->Wait();
//
// Every pointer is a device pointer on device(). Collectives run on this
// communicator's own lane; Note [Communication lane] in
// nccl_communicator.cc says how they are ordered against other lanes, and
// Note [Abort] in nccl_work.cc how a failed rank frees the others.
//
// Watchdog. Every queued collective is watched on the device from a thread
// of the communicator's (DeviceCollectiveWatchdog): one that has not
// completed within timeout() of reaching the head of the queue, or an error
// NCCL reports asynchronously, aborts the communicator (ncclCommAbort, so
// NCCL's kernels exit) and abandons the process's host waits on the GPU
// (Note [Abandoned host waits] in core/cuda/host_wait.h). The worker then
// fails at its next collective or host wait, with an error naming this
// communicator and the collective ("AllReduce #17 (4194304 bytes, sum,
// gradient bucket 3) did not complete within 60000 ms on the device ...").
//
// Results. AllReduce writes the same bits on every rank (NCCL reduces each
// chunk once and copies it out), but the order of the sum is NCCL's and may
// change with message size, algorithm and NCCL version, so results need not
// match ThreadCommunicator's bitwise. ReduceScatter is ncclReduceScatter,
// summing in NCCL's order too. kAverage is ncclAvg, which NCCL computes
// for floats by multiplying every input by 1/size() before summing: the same
// bits as sum * (1.0f / size()) whenever size() is a power of two (both
// scalings are exact), possibly the last bit off otherwise.
//
// bfloat16 collectives are NCCL's own (ncclBfloat16). NCCL combines the
// ranks' inputs in the order of its algorithm and may round partial sums to
// bfloat16 (its ring kernels do, at every hop), so a sum over more than two
// ranks may be further from the float32 sum than the host transports' (which
// round once); sums that are exact in bfloat16 stay exact.
//
// NVLS (NVLink SHARP multicast) is left to NCCL's environment: nothing here
// sets or clears NCCL_NVLS_ENABLE. Two NCCL settings are ours, on one node
// only (Note [NCCL tuning] in nccl_handle.h): kMinCtas to kMaxCtas CTAs per
// collective, and reduce buffers in symmetric memory.
#ifndef TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_
#define TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/lane.h"
#include "core/tensor.h"
#include "parallel/communicator.h"
#include "parallel/device_collective_watchdog.h"
#include "parallel/nccl_handle.h"

namespace tandem {

class LaneEventPool;
class NcclCommState;

class NcclCommunicator final : public Communicator {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300 * 1000};
  // The CTA bounds of every communicator made here (nccl_handle.h).
  static constexpr int kMinCtas = kNcclMinCtas;
  static constexpr int kMaxCtas = kNcclMaxCtas;

  // One rank of a communicator spanning every rank of `host`: rank 0 of host
  // makes an ncclUniqueId, host broadcasts it (BroadcastNcclUniqueId), and
  // each rank joins with host.rank() and host.size() on GPU `device`.
  // Collective over host; every rank must pass a different device of its
  // node. Throws tandem::Error (naming the rank and device) on failure.
  static std::unique_ptr<NcclCommunicator> Create(Communicator& host, int device);

  // Rank `rank` of `size` on GPU `device`, owning `comm` (made for exactly
  // that; see NcclComm::InitRank and InitGroup), its ranks all on one node
  // or not (Note [NCCL tuning] in nccl_handle.h).
  NcclCommunicator(NcclComm comm, int rank, int size, int device, bool single_node = true);
  // Waits for the work queued on the communication lane, then releases the
  // communicator (ncclCommDestroy; nothing more after Abort, whose
  // ncclCommAbort released it). Work and reduce buffers may outlive it.
  // Never throws; logs failures to stderr.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // "NcclCommunicator(rank 1 of 2, cuda:1, NCCL 2.28.9)".
  std::string Describe() const override { return description_; }
  // Gives up: releases the NCCL communicator with ncclCommAbort, which also
  // makes this rank's NCCL kernels still on the GPU exit; every later
  // collective, and every Work's Wait or WaitOn (waiting now or later),
  // throws CollectiveAbortedError. Callable from any thread, any number of
  // times; the first reason is kept. It aborts this rank only: to free the
  // other ranks, abort theirs too (the launcher does, in threads mode) or end
  // their processes (MPI mode).
  void Abort(const std::string& reason) override;

  // With symmetric_memory(): memory from ncclMemAlloc, registered as a
  // symmetric window (ncclCommWindowRegister), which NCCL all-reduces with
  // its symmetric kernels. Collective: every rank asks for the same counts
  // in the same order, numbered like a collective ("WindowRegister #n").
  // Zeroed on the device's main lane. The buffer may outlive this
  // communicator; it is deregistered and freed, after the device has
  // finished its queued work, on the thread that drops the last tensor
  // viewing it. Otherwise, and for count 0, ordinary device memory.
  Tensor NewReduceBuffer(int64_t count, Device device) override;
  // And the base class's form for other dtypes (views of the above).
  using Communicator::NewReduceBuffer;
  // NCCL 2.27 or newer, 2+ ranks, and TANDEM_NCCL_SYMMETRIC is not "0".
  bool symmetric_memory() const { return symmetric_memory_; }
  bool single_node() const override { return single_node_; }

  // The GPU of this rank.
  int device() const { return device_; }
  bool aborted() const;

  // How long Work::Wait waits for a collective, and the watchdog lets one
  // sit at the head of the device's queue, before it aborts this rank with
  // an error naming the collective. Default kDefaultTimeout.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;

  // How many lane events this communicator has created: events are
  // recycled, so after the first steps this stops growing.
  int events_created() const;

 protected:
  // Queues `c` on the communication lane after c.options.after (Note
  // [Communication lane]); returns its NcclWork.
  std::shared_ptr<Work> Start(const Collective& c) override;

 private:
  // The communication lane waits for what `c` must follow.
  void FollowLanes(const Collective& c, const Lane& lane) const;

  const int rank_;
  const int size_;
  const int device_;
  const bool single_node_;
  const std::string description_;
  bool symmetric_memory_ = false;
  // Shared with every Work and reduce buffer handed out.
  std::shared_ptr<NcclCommState> state_;
  std::unique_ptr<DeviceCollectiveWatchdog> watchdog_;
  OwnedLane lane_;
  std::shared_ptr<LaneEventPool> events_;
  Tensor scratch_;  // [1] on device_: what Barrier all-reduces
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_NCCL_COMMUNICATOR_H_
