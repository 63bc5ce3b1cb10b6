// NcclThreadGroup: the ranks of one NCCL communicator as threads of this
// process, rank r on GPU devices[r].
//
//   NcclThreadGroup group({0, 1});          // ranks 0 and 1 on cuda:0, cuda:1
//   // ... in rank r's thread:
//   NcclCommunicator& comm = group.communicator(r);
//   comm.AllReduce(grads, n, ReduceOp::kAverage)->Wait();
//
// The ranks are created together, from the calling thread, before the
// threads that use them start, so no rank can be left waiting in
// initialisation for a thread that never came. Give communicator(r) to rank
// r's thread; the group must outlive those threads. Code outside parallel/'s
// NCCL files makes groups through MakeThreadDeviceGroup
// (parallel/device_communicators.h).
#ifndef TANDEM_PARALLEL_NCCL_THREAD_GROUP_H_
#define TANDEM_PARALLEL_NCCL_THREAD_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "parallel/nccl_communicator.h"

namespace tandem {

class NcclThreadGroup {
 public:
  // Throws tandem::Error if `devices` is empty, names a device twice (NCCL
  // needs one GPU per rank) or NCCL cannot create the communicators.
  explicit NcclThreadGroup(const std::vector<int>& devices);
  // Destroys the communicators rank by rank (see ~NcclCommunicator); the
  // threads using them must have finished.
  ~NcclThreadGroup();
  NcclThreadGroup(const NcclThreadGroup&) = delete;
  NcclThreadGroup& operator=(const NcclThreadGroup&) = delete;

  int size() const { return static_cast<int>(communicators_.size()); }
  // Throws tandem::Error for a rank outside [0, size()).
  NcclCommunicator& communicator(int rank);

  // Aborts every rank's communicator (NcclCommunicator::Abort), so that no
  // rank stays inside NCCL waiting for one that failed. Callable from any
  // thread.
  void Abort(const std::string& reason);

 private:
  std::vector<std::unique_ptr<NcclCommunicator>> communicators_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_NCCL_THREAD_GROUP_H_
