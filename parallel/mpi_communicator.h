// MPI: the runtime's lifetime (MpiRuntime) and a Communicator over Open MPI
// (MpiCommunicator), one process per rank, started by mpirun.
//
//   int main(int argc, char** argv) {
//     tandem::MpiRuntime mpi(&argc, &argv);     // MPI_Init_thread .. Finalize
//     tandem::MpiCommunicator comm;             // its own MPI_COMM_WORLD dup
//     std::vector<float> grads(1000, 1.0f);
//     comm.AllReduce(grads.data(), grads.size(), tandem::ReduceOp::kSum)->Wait();
//   }                                           // every element == comm.size()
//
// Every dtype of core/dtype.h: bfloat16 all-reduces and reduce-scatters add
// in float32 and round once (Note [bfloat16 over MPI] in
// mpi_communicator.cc); broadcasts and all-gathers move the elements' bits as
// they are.
//
// Destroy communicators before the runtime. MPI can be initialised once per
// process: a program that calls Launch(--mode=mpi) more than once, or mixes
// it with its own MPI code, holds one MpiRuntime in main() for the whole run;
// later MpiRuntimes then find MPI running and leave it alone.
//
// Threads. Each MpiCommunicator runs its collectives on a progress thread of
// its own (parallel/collective_queue.h), so the thread that calls MPI is not
// the caller's. See Note [MPI thread levels] in mpi_communicator.cc:
//   - MPI_THREAD_MULTIPLE (asked for) allows everything: several
//     MpiCommunicators, e.g. one as another's fingerprint channel
//     (set_fingerprint_channel), and MPI calls of the program's own
//     alongside.
//   - MPI_THREAD_SERIALIZED allows one MpiCommunicator at a time in the
//     process, and the program's own MPI calls only while none of its
//     collectives is in flight. A second MpiCommunicator is refused with an
//     error saying so.
//   - Anything less is an error at start-up (MpiRuntime).
#ifndef TANDEM_PARALLEL_MPI_COMMUNICATOR_H_
#define TANDEM_PARALLEL_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/collective_queue.h"
#include "parallel/communicator.h"

namespace tandem {

// Initialises MPI unless it already is, and finalises it on destruction if
// it initialised it. Throws if MPI was finalised already (it cannot restart)
// or provides less than MPI_THREAD_SERIALIZED. Asks for MPI_THREAD_MULTIPLE,
// which a fingerprint channel (a second MpiCommunicator) needs.
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

namespace internal {

// Owns an MPI communicator: MPI_Comm_free on destruction, unless MPI is
// finalised (then the handle is gone with everything else). Never throws.
class OwnedMpiComm {
 public:
  OwnedMpiComm() = default;
  ~OwnedMpiComm();
  OwnedMpiComm(const OwnedMpiComm&) = delete;
  OwnedMpiComm& operator=(const OwnedMpiComm&) = delete;
  MPI_Comm get() const { return comm_; }
  // For the MPI call that creates it.
  MPI_Comm* out() { return &comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace internal

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `base` so our collectives never match a user's messages on
  // it, and makes MPI errors on the duplicate return codes (which MPI_CHECK
  // turns into tandem::Error) instead of ending the job. Collective over
  // `base`; MPI must be initialised (see MpiRuntime). Throws, on every rank
  // alike, if another MpiCommunicator is alive and MPI provides less than
  // MPI_THREAD_MULTIPLE.
  explicit MpiCommunicator(MPI_Comm base = MPI_COMM_WORLD);
  // Fails what is still queued, waits for the running collective, then
  // frees the duplicate; never throws.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // "MpiCommunicator(rank 1 of 4, local rank 1 on node7,
  // MPI_THREAD_MULTIPLE)". Made at construction: asks MPI nothing, so any
  // thread may call it while collectives run.
  std::string Describe() const override { return description_; }
  // Prints `reason` to stderr and calls MPI_Abort, which ends every process
  // of the job: a rank blocked inside an MPI collective cannot be woken any
  // other way. Does not return.
  void Abort(const std::string& reason) override;

  // This rank's index among the ranks on its node (see LocalRank).
  int local_rank() const { return local_rank_; }
  // The number of ranks on this rank's node.
  int local_size() const { return local_size_; }
  bool single_node() const override { return local_size_ == size_; }
  MPI_Comm comm() const { return comm_.get(); }

  // MPI counts are ints, so a collective of more elements than this is split
  // into several calls. Tests lower it to exercise the split. Applies to
  // collectives that start running after the call.
  void set_max_elements_per_call(int64_t n);

  // A collective still running after `timeout` ends the job (MPI_Abort)
  // with a message naming it, its sequence number and its size: MPI cannot
  // interrupt a collective, so a dead or diverged rank would hang the rest.
  // Default kDefaultTimeout.
  static constexpr std::chrono::seconds kDefaultTimeout{60};
  void set_timeout(std::chrono::milliseconds timeout);

 protected:
  // Queues `c` on the progress thread (see Note [MPI thread levels]).
  std::shared_ptr<Work> Start(const Collective& c) override;

 private:
  // The exchange, on the progress thread.
  void Run(const Collective& c);
  void RunAllReduce(const Collective& c, int64_t max_per_call);
  // Widened to float32 and rounded back; see Note [bfloat16 over MPI].
  void RunBFloat16AllReduce(const Collective& c, int64_t max_per_call);
  void RunBroadcast(const Collective& c, int64_t max_per_call);
  void RunAllGather(const Collective& c, int64_t max_per_call);
  // One rooted reduce per rank; see Note [ReduceScatter over MPI].
  void RunReduceScatter(const Collective& c, int64_t max_per_call);
  void RunBFloat16ReduceScatter(const Collective& c, int64_t max_per_call);

  // Counts this communicator among the live ones (see Note [MPI thread
  // levels]); released by the destructor.
  struct LiveSlot {
    LiveSlot();
    ~LiveSlot();
    LiveSlot(const LiveSlot&) = delete;
    LiveSlot& operator=(const LiveSlot&) = delete;
  };

  LiveSlot live_;
  internal::OwnedMpiComm comm_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string description_;
  std::atomic<int64_t> max_elements_per_call_{INT_MAX};
  // A bfloat16 all-reduce's (or reduce-scatter's send) elements as float32;
  // only the progress thread touches it, one collective at a time.
  std::vector<float> widened_;
  // After comm_: destroyed first, so its thread has stopped calling MPI on
  // comm_ before comm_ is freed.
  std::unique_ptr<CollectiveQueue> queue_;
};

// Where this process sits among those of `comm` that share its node
// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED): its rank there, 0..k-1
// on each node (the index of the GPU to use), and k. Collective over `comm`.
struct NodePlace {
  int local_rank = 0;
  int local_size = 1;
};
NodePlace PlaceOnNode(MPI_Comm comm = MPI_COMM_WORLD);
// PlaceOnNode(comm).local_rank.
int LocalRank(MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_MPI_COMMUNICATOR_H_
