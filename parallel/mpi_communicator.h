// MPI: the runtime's lifetime (MpiRuntime) and a Communicator over Open MPI
// (MpiCommunicator), one process per rank, started by mpirun.
//
//   int main(int argc, char** argv) {
//     tandem::MpiRuntime mpi(&argc, &argv);     // MPI_Init_thread .. Finalize
//     tandem::MpiCommunicator comm;             // its own MPI_COMM_WORLD dup
//     std::vector<float> grads(1000, 1.0f);
//     comm.AllReduce(grads.data(), grads.size(), tandem::ReduceOp::kSum);
//   }                                           // every element == comm.size()
//
// Destroy communicators before the runtime. MPI can be initialised once per
// process: a program that calls Launch(--mode=mpi) more than once, or mixes
// it with its own MPI code, holds one MpiRuntime in main() for the whole run;
// later MpiRuntimes then find MPI running and leave it alone.
//
// Threads. MPI is asked for MPI_THREAD_MULTIPLE because the reducer issues
// collectives from a communication thread while the main thread may call
// MPI too; MPI_THREAD_SERIALIZED is accepted (then only one thread may be in
// MPI at a time, which the reducer can arrange) and anything less is an
// error at start-up. Collectives on one communicator are still issued by one
// thread at a time, in the same order on every rank.
#ifndef TANDEM_PARALLEL_MPI_COMMUNICATOR_H_
#define TANDEM_PARALLEL_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <chrono>
#include <memory>
#include <string>

#include "parallel/collective_watchdog.h"
#include "parallel/communicator.h"

namespace tandem {

// Initialises MPI unless it already is, and finalises it on destruction if
// it initialised it. Throws if MPI was finalised already (it cannot restart)
// or provides less than MPI_THREAD_SERIALIZED.
class MpiRuntime {
 public:
  explicit MpiRuntime(int* argc = nullptr, char*** argv = nullptr);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // What MPI provided: MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE.
  int thread_level() const { return thread_level_; }
  // Whether this object called MPI_Init_thread (and so will finalise).
  bool owns() const { return owns_; }

  // "MPI_THREAD_MULTIPLE".
  static std::string ThreadLevelName(int level);

 private:
  int thread_level_ = MPI_THREAD_SINGLE;
  bool owns_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `base` so our collectives never match a user's messages on
  // it, and makes MPI errors on the duplicate return codes (which MPI_CHECK
  // turns into tandem::Error) instead of ending the job. Collective over
  // `base`; MPI must be initialised (see MpiRuntime).
  explicit MpiCommunicator(MPI_Comm base = MPI_COMM_WORLD);
  // Frees the duplicate; never throws.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // MPI_Allreduce(MPI_IN_PLACE, MPI_SUM), then a multiply by 1.0f/size()
  // for kAverage, as ThreadCommunicator does.
  void AllReduce(float* data, int64_t count, ReduceOp op) override;
  void Broadcast(float* data, int64_t count, int root) override;
  void Barrier() override;
  void AllGather(const float* send, int64_t count_per_rank,
                 float* recv) override;
  // "MpiCommunicator(rank 1 of 4, local rank 1 on node7,
  // MPI_THREAD_MULTIPLE)".
  std::string Describe() const override;
  // Prints `reason` to stderr and calls MPI_Abort, which ends every process
  // of the job: a rank blocked inside an MPI collective cannot be woken any
  // other way. Does not return.
  void Abort(const std::string& reason) override;

  // This rank's index among the ranks on its node (see LocalRank).
  int local_rank() const { return local_rank_; }
  MPI_Comm comm() const { return comm_; }

  // MPI counts are ints, so a collective of more floats than this is split
  // into several calls. Tests lower it to exercise the split.
  void set_max_elements_per_call(int64_t n);

  // A collective still unfinished after `timeout` ends the job (MPI_Abort)
  // with a message naming it, its sequence number and its size: MPI cannot
  // interrupt a collective, so a dead or diverged rank would hang the rest.
  // Default kDefaultTimeout.
  static constexpr std::chrono::seconds kDefaultTimeout{60};
  void set_timeout(std::chrono::milliseconds timeout);

  // Debug mode: before each collective every rank all-gathers its
  // (sequence number, kind, count) fingerprint; a rank that issues another
  // collective than the others makes every rank throw, naming who called
  // what, instead of pairing mismatched buffers or hanging.
  void set_check_fingerprints(bool check) { check_fingerprints_ = check; }

 private:
  // Context for errors: "MpiCommunicator(...): AllReduce #3 (4000 bytes)".
  std::string Context(const char* kind, int64_t count) const;
  CollectiveWatchdog& watchdog();
  void CheckFingerprints(const char* kind, int64_t count);
  CollectiveWatchdog::Watch Watch(const char* kind, int64_t count);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  uint64_t sequence_ = 0;
  int64_t max_elements_per_call_ = INT_MAX;
  // Aborts the job when a collective hangs (see set_timeout).
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  bool check_fingerprints_ = false;
};

// The rank of this process among those of `comm` that share its node
// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED): 0..k-1 on each node, the
// index of the GPU to use. Collective over `comm`.
int LocalRank(MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_MPI_COMMUNICATOR_H_
