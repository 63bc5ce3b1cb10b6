// The one factory for communicators over device memory (NCCL on GPUs).
//
// Code that needs GPU communicators (the launcher, pipeline replica groups)
// asks here and never names NCCL: where Bazel built without CUDA, the
// implementation behind this header (chosen by parallel/BUILD) makes none
// and says why.
//
//   // Threads mode: every rank of one process, one GPU each, made at once.
//   auto group = MakeThreadDeviceGroup({0, 1}, /*comms=*/1, options);
//   std::vector<Communicator*> mine = group->comms(rank);
//
//   // One rank per process (MPI): bootstrapped over the host communicator.
//   auto comms = MakeRankDeviceCommunicators(host, /*gpu=*/0, 1, options);
#ifndef TANDEM_PARALLEL_DEVICE_COMMUNICATORS_H_
#define TANDEM_PARALLEL_DEVICE_COMMUNICATORS_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tandem {

struct DeviceCommOptions {
  // A host wait for a collective longer than this aborts the communicator
  // and fails naming the collective.
  std::chrono::milliseconds timeout{300 * 1000};
  // Debug, MakeRankDeviceCommunicators only: compare every collective
  // across ranks over this host communicator (Communicator::
  // set_fingerprint_channel), which must outlive the communicators' use;
  // null: off. The ranks of a thread group each need a comm of their own:
  // set it on each communicator of comms(rank).
  Communicator* fingerprint_channel = nullptr;
};

// The device communicators of every rank of one process: `comms`
// communicators per rank over the same ranks, rank r on GPU gpus[r].
class DeviceGroup {
 public:
  virtual ~DeviceGroup() = default;
  virtual int size() const = 0;
  // Rank r's communicators, comm 0 first; owned by the group.
  virtual std::vector<Communicator*> comms(int rank) = 0;
  // Aborts every communicator of every rank (their device work exits and
  // every later or waiting collective fails). Callable from any thread.
  virtual void Abort(const std::string& reason) = 0;
};

// Whether this build has device communicators; if not, `why` (when given)
// says why. It does not look for GPUs (CudaDeviceCount does).
bool DeviceCommunicatorsAvailable(std::string* why = nullptr);

// Throws tandem::Error if the build has none, `gpus` is empty or names a
// GPU twice (one GPU per rank), `comms` < 1, options.fingerprint_channel is
// set (see DeviceCommOptions), or NCCL cannot create them.
std::unique_ptr<DeviceGroup> MakeThreadDeviceGroup(const std::vector<int>& gpus,
                                                   int comms,
                                                   const DeviceCommOptions& options);

// This process's rank of `comms` communicators spanning every rank of
// `host` (same rank, same size), on GPU `gpu`. Collective over host: every
// rank calls it, each with a GPU of its own on its node. Throws
// tandem::Error if the build has none, `comms` < 1 or NCCL fails.
std::vector<std::unique_ptr<Communicator>> MakeRankDeviceCommunicators(
    Communicator& host, int gpu, int comms, const DeviceCommOptions& options);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_DEVICE_COMMUNICATORS_H_
