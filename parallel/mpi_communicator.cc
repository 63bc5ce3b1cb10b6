#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "parallel/collective_fingerprint.h"
#include "parallel/mpi_check.h"

namespace tandem {

namespace {

// Frees a communicator made for a moment (LocalRank's node communicator).
class ScopedComm {
 public:
  ScopedComm() = default;
  ~ScopedComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  ScopedComm(const ScopedComm&) = delete;
  ScopedComm& operator=(const ScopedComm&) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

// Frees a derived datatype (AllGather's strided receive block).
class ScopedType {
 public:
  ScopedType() = default;
  ~ScopedType() {
    if (type != MPI_DATATYPE_NULL) MPI_Type_free(&type);
  }
  ScopedType(const ScopedType&) = delete;
  ScopedType& operator=(const ScopedType&) = delete;
  MPI_Datatype type = MPI_DATATYPE_NULL;
};

}  // namespace

// ---------------------------------------------------------------------------
// MpiRuntime

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int finalized = 0;
  MPI_CHECK(MPI_Finalized(&finalized));
  TANDEM_CHECK(!finalized)
      << "MPI was already finalised in this process and cannot start again: "
         "hold one tandem::MpiRuntime in main() for the whole program";
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) {
    MPI_CHECK(MPI_Query_thread(&thread_level_));
  } else {
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
    owns_ = true;
  }
  if (thread_level_ < MPI_THREAD_SERIALIZED) {
    if (owns_) MPI_Finalize();
    TANDEM_CHECK(false)
        << "MPI provides only " << ThreadLevelName(thread_level_)
        << ", but Tandem needs at least MPI_THREAD_SERIALIZED (it asks for "
           "MPI_THREAD_MULTIPLE): use an MPI built with thread support";
  }
}

MpiRuntime::~MpiRuntime() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiRuntime::ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

// ---------------------------------------------------------------------------
// MpiCommunicator

MpiCommunicator::MpiCommunicator(MPI_Comm base) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  TANDEM_CHECK(initialized)
      << "MpiCommunicator needs MPI running: create a tandem::MpiRuntime "
         "first";
  MPI_CHECK(MPI_Comm_dup(base, &comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  local_rank_ = LocalRank(comm_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize the handle is gone with everything else.
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::set_max_elements_per_call(int64_t n) {
  TANDEM_CHECK(n >= 1 && n <= INT_MAX)
      << "elements per MPI call must be in [1, INT_MAX], got " << n;
  max_elements_per_call_ = n;
}

namespace {

// "<self>: AllReduce #3 (4000 bytes)".
std::string CollectiveText(const std::string& self, const char* kind, uint64_t sequence,
                           int64_t count) {
  return self + ": " + kind + " #" + std::to_string(sequence) + " (" +
         std::to_string(count * static_cast<int64_t>(sizeof(float))) + " bytes)";
}

}  // namespace

std::string MpiCommunicator::Context(const char* kind, int64_t count) const {
  return CollectiveText(Describe(), kind, sequence_, count);
}

CollectiveWatchdog& MpiCommunicator::watchdog() {
  // Created on first use, so a communicator that never communicates starts
  // no thread.
  if (!watchdog_) {
    // Described here, on the calling thread: the watchdog's thread must
    // make no MPI calls (Describe asks MPI for the host name).
    const std::string self = Describe();
    watchdog_ = std::make_unique<CollectiveWatchdog>(
        kDefaultTimeout,
        [self](const char* kind, uint64_t sequence, int64_t count) {
          return CollectiveText(self, kind, sequence, count);
        },
        [this](const std::string& what) {
          Abort("tandem: collective timeout on rank " + std::to_string(rank_) + ": " + what);
        });
  }
  return *watchdog_;
}

CollectiveWatchdog::Watch MpiCommunicator::Watch(const char* kind, int64_t count) {
  if (check_fingerprints_) CheckFingerprints(kind, count);
  return watchdog().Start(kind, sequence_, count);
}

void MpiCommunicator::CheckFingerprints(const char* kind, int64_t count) {
  // MPI_Allgather of int64s directly, not CheckFingerprint over this
  // communicator: its AllGather would check a fingerprint of its own.
  const int64_t mine[3] = {static_cast<int64_t>(sequence_), FingerprintKind(kind), count};
  std::vector<int64_t> all(3 * static_cast<size_t>(size_));
  MPI_CHECK(MPI_Allgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, comm_))
      << Context(kind, count) << ": exchanging collective fingerprints";
  std::vector<Fingerprint> fingerprints(static_cast<size_t>(size_));
  for (size_t r = 0; r < fingerprints.size(); ++r) {
    fingerprints[r] = {all[3 * r], all[3 * r + 1], all[3 * r + 2]};
  }
  CheckFingerprintsAgree(fingerprints, rank_);
}

void MpiCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  watchdog().set_timeout(timeout);
}

void MpiCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  ++sequence_;
  auto watch = Watch("AllReduce", count);
  TANDEM_CHECK(count >= 0) << Context("AllReduce", count);
  for (int64_t offset = 0; offset < count; offset += max_elements_per_call_) {
    const int n =
        static_cast<int>(std::min(max_elements_per_call_, count - offset));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + offset, n, MPI_FLOAT, MPI_SUM,
                            comm_))
        << Context("AllReduce", count);
  }
  if (op == ReduceOp::kAverage) {
    // The same rounding as ThreadCommunicator: one multiply by 1/N.
    const float scale = 1.0f / size_;
    for (int64_t i = 0; i < count; ++i) data[i] *= scale;
  }
}

void MpiCommunicator::Broadcast(float* data, int64_t count, int root) {
  ++sequence_;
  auto watch = Watch("Broadcast", count);
  TANDEM_CHECK(count >= 0) << Context("Broadcast", count);
  TANDEM_CHECK(root >= 0 && root < size_)
      << Context("Broadcast", count) << ": root " << root << " is not a rank";
  for (int64_t offset = 0; offset < count; offset += max_elements_per_call_) {
    const int n =
        static_cast<int>(std::min(max_elements_per_call_, count - offset));
    MPI_CHECK(MPI_Bcast(data + offset, n, MPI_FLOAT, root, comm_))
        << Context("Broadcast", count);
  }
}

void MpiCommunicator::Barrier() {
  ++sequence_;
  auto watch = Watch("Barrier", 0);
  MPI_CHECK(MPI_Barrier(comm_)) << Context("Barrier", 0);
}

void MpiCommunicator::AllGather(const float* send, int64_t count_per_rank,
                                float* recv) {
  ++sequence_;
  auto watch = Watch("AllGather", count_per_rank);
  TANDEM_CHECK(count_per_rank >= 0) << Context("AllGather", count_per_rank);
  // MPI forbids overlapping send and receive buffers except via MPI_IN_PLACE.
  const bool in_place = send == recv + rank_ * count_per_rank;
  if (count_per_rank <= max_elements_per_call_) {
    const int n = static_cast<int>(count_per_rank);
    MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, MPI_FLOAT, recv,
                            n, MPI_FLOAT, comm_))
        << Context("AllGather", count_per_rank);
    return;
  }
  // Each call moves elements [offset, offset + n) of every rank's block. The
  // receive type is n floats with an extent of a whole block, so rank r's
  // piece lands at recv + r * count_per_rank + offset; extents are MPI_Aint,
  // so no int overflows however large the blocks.
  for (int64_t offset = 0; offset < count_per_rank;
       offset += max_elements_per_call_) {
    const int n = static_cast<int>(
        std::min(max_elements_per_call_, count_per_rank - offset));
    ScopedType piece, strided;
    MPI_CHECK(MPI_Type_contiguous(n, MPI_FLOAT, &piece.type));
    MPI_CHECK(MPI_Type_create_resized(
        piece.type, 0, static_cast<MPI_Aint>(count_per_rank * sizeof(float)),
        &strided.type));
    MPI_CHECK(MPI_Type_commit(&strided.type));
    MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send + offset, n,
                            MPI_FLOAT, recv + offset, 1, strided.type, comm_))
        << Context("AllGather", count_per_rank);
  }
}

std::string MpiCommunicator::Describe() const {
  char host[MPI_MAX_PROCESSOR_NAME] = "?";
  int length = 0;
  MPI_Get_processor_name(host, &length);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return "MpiCommunicator(rank " + std::to_string(rank_) + " of " +
         std::to_string(size_) + ", local rank " + std::to_string(local_rank_) +
         " on " + host + ", " + MpiRuntime::ThreadLevelName(level) + ")";
}

void MpiCommunicator::Abort(const std::string& reason) {
  std::cerr << reason << std::endl;
  MPI_Abort(comm_, 1);
  // MPI_Abort does not return in Open MPI; be sure nobody waits if it did.
  std::_Exit(1);
}

int LocalRank(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ScopedComm node;
  // Key = world rank keeps the node-local order the same as the global one.
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                &node.comm));
  int local_rank = 0;
  MPI_CHECK(MPI_Comm_rank(node.comm, &local_rank));
  return local_rank;
}

}  // namespace tandem
