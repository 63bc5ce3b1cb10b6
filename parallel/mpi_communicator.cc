#include "parallel/mpi_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "parallel/mpi_check.h"

namespace tandem {

namespace {

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

// The MPI type that carries one element of `dtype` as it is: bfloat16
// travels as its 16-bit pattern (MPI has no bfloat16 type).
MPI_Datatype WireType(DType dtype) {
  return dtype == DType::kBFloat16 ? MPI_UINT16_T : MPI_FLOAT;
}

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

// Note [MPI thread levels]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// An MpiCommunicator calls MPI from its progress thread (parallel/
// collective_queue.h), one collective at a time, while its caller goes on.
// Two MpiCommunicators therefore call MPI from two threads at once whenever
// both have collectives in flight; a fingerprint channel always does, since
// the preamble exchanges fingerprints over the channel while earlier
// collectives of the channelled communicator are still running. Concurrent
// calls from several threads need MPI_THREAD_MULTIPLE. The rule, enforced
// at construction where it can be decided the same way on every rank: a
// second MpiCommunicator alive in the process needs MPI_THREAD_MULTIPLE;
// under MPI_THREAD_SERIALIZED it throws before any MPI call. What cannot be
// checked is the program's own MPI calls: under MPI_THREAD_SERIALIZED they
// must wait until the communicator's Works have completed.
//
// Describe() is computed once, at construction, so that error messages made
// on any thread ask MPI nothing.

namespace {

// MpiCommunicators alive in this process; see Note [MPI thread levels].
std::atomic<int> live_communicators{0};

int ThreadLevel() {
  int level = MPI_THREAD_SINGLE;
  MPI_CHECK(MPI_Query_thread(&level));
  return level;
}

}  // namespace

MpiCommunicator::LiveSlot::LiveSlot() { live_communicators.fetch_add(1); }

MpiCommunicator::LiveSlot::~LiveSlot() { live_communicators.fetch_sub(1); }

internal::OwnedMpiComm::~OwnedMpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize the handle is gone with everything else.
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MpiCommunicator::MpiCommunicator(MPI_Comm base) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  TANDEM_CHECK(initialized)
      << "MpiCommunicator needs MPI running: create a tandem::MpiRuntime "
         "first";
  const int level = ThreadLevel();
  const int alive = live_communicators.load();
  // See Note [MPI thread levels].
  TANDEM_CHECK(alive == 1 || level == MPI_THREAD_MULTIPLE)
      << "a second MpiCommunicator (" << alive << " alive in this process, e.g. one "
      << "serving as another's fingerprint channel) calls MPI from its own progress thread "
      << "while the first may be in MPI too, which needs MPI_THREAD_MULTIPLE, but MPI "
      << "provides " << MpiRuntime::ThreadLevelName(level)
      << ": use an MPI built with thread support, or one MpiCommunicator at a time";
  MPI_CHECK(MPI_Comm_dup(base, comm_.out()));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
  const NodePlace place = PlaceOnNode(comm_.get());
  local_rank_ = place.local_rank;
  local_size_ = place.local_size;
  char host[MPI_MAX_PROCESSOR_NAME] = "?";
  int length = 0;
  MPI_Get_processor_name(host, &length);
  description_ = "MpiCommunicator(rank " + std::to_string(rank_) + " of " +
                 std::to_string(size_) + ", local rank " + std::to_string(local_rank_) +
                 " on " + host + ", " + MpiRuntime::ThreadLevelName(level) + ")";

  CollectiveQueueOptions options;
  options.owner = description_;
  options.run = [this](const Collective& c) { Run(c); };
  options.timeout = kDefaultTimeout;
  options.on_timeout = [this](const std::string& what) {
    // On the watchdog's thread; Abort does not return.
    Abort("tandem: collective timeout on rank " + std::to_string(rank_) + ": " + what);
  };
  queue_ = std::make_unique<CollectiveQueue>(std::move(options));
}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::set_max_elements_per_call(int64_t n) {
  TANDEM_CHECK(n >= 1 && n <= INT_MAX)
      << "elements per MPI call must be in [1, INT_MAX], got " << n;
  max_elements_per_call_.store(n);
}

void MpiCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  TANDEM_CHECK(timeout.count() > 0)
      << Describe() << ": collective timeout must be positive, got " << timeout.count() << " ms";
  queue_->set_timeout(timeout);
}

std::shared_ptr<Work> MpiCommunicator::Start(const Collective& c) {
  TANDEM_CHECK(c.kind != CollectiveKind::kWindowRegister)
      << Context(c) << ": MpiCommunicator has no collective '" << ToString(c.kind) << "'";
  return queue_->Enqueue(c);
}

void MpiCommunicator::Run(const Collective& c) {
  const int64_t max_per_call = max_elements_per_call_.load();
  switch (c.kind) {
    case CollectiveKind::kAllReduce: RunAllReduce(c, max_per_call); break;
    case CollectiveKind::kBroadcast: RunBroadcast(c, max_per_call); break;
    case CollectiveKind::kAllGather: RunAllGather(c, max_per_call); break;
    case CollectiveKind::kReduceScatter: RunReduceScatter(c, max_per_call); break;
    case CollectiveKind::kBarrier: MPI_CHECK(MPI_Barrier(comm_.get())) << Context(c); break;
    case CollectiveKind::kWindowRegister: break;  // refused by Start
  }
}

void MpiCommunicator::RunAllReduce(const Collective& c, int64_t max_per_call) {
  if (c.dtype == DType::kBFloat16) {
    RunBFloat16AllReduce(c, max_per_call);
    return;
  }
  float* data = static_cast<float*>(c.data);
  for (int64_t offset = 0; offset < c.count; offset += max_per_call) {
    const int n = static_cast<int>(std::min(max_per_call, c.count - offset));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + offset, n, MPI_FLOAT, MPI_SUM, comm_.get()))
        << Context(c);
  }
  if (c.op == ReduceOp::kAverage) {
    // The same rounding as ThreadCommunicator: one multiply by 1/N.
    const float scale = 1.0f / size_;
    for (int64_t i = 0; i < c.count; ++i) data[i] *= scale;
  }
}

// Note [bfloat16 over MPI]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// MPI has no bfloat16 type, and a user-defined MPI_Op over 16-bit words
// would add (and round) in whatever order MPI combines ranks. So a bfloat16
// all-reduce widens the elements to float32 in a buffer of this
// communicator's own, all-reduces that as any float32 all-reduce (sum, then
// one multiply by 1/N for kAverage), and rounds each result to bfloat16
// once, to nearest even: the same bits as ThreadCommunicator's bfloat16
// all-reduce whenever the float32 sums agree. It moves float32 bytes, twice
// what the bfloat16 data holds; on a host transport that costs little, and
// bfloat16 is here for the programs that use it, not for speed. Broadcast
// and AllGather move the 16-bit patterns as they are (MPI_UINT16_T).
void MpiCommunicator::RunBFloat16AllReduce(const Collective& c, int64_t max_per_call) {
  uint16_t* bits = static_cast<uint16_t*>(c.data);
  widened_.resize(static_cast<size_t>(c.count));
  for (int64_t i = 0; i < c.count; ++i) widened_[i] = BFloat16BitsToFloat(bits[i]);
  Collective wide = c;
  wide.dtype = DType::kFloat32;
  wide.data = widened_.data();
  RunAllReduce(wide, max_per_call);
  for (int64_t i = 0; i < c.count; ++i) bits[i] = FloatToBFloat16Bits(widened_[i]);
}

void MpiCommunicator::RunBroadcast(const Collective& c, int64_t max_per_call) {
  char* data = static_cast<char*>(c.data);
  const int64_t element = static_cast<int64_t>(SizeOf(c.dtype));
  for (int64_t offset = 0; offset < c.count; offset += max_per_call) {
    const int n = static_cast<int>(std::min(max_per_call, c.count - offset));
    MPI_CHECK(MPI_Bcast(data + offset * element, n, WireType(c.dtype), c.root, comm_.get()))
        << Context(c);
  }
}

void MpiCommunicator::RunAllGather(const Collective& c, int64_t max_per_call) {
  const MPI_Datatype type = WireType(c.dtype);
  const int64_t element = static_cast<int64_t>(SizeOf(c.dtype));
  const char* send = static_cast<const char*>(c.send);
  char* recv = static_cast<char*>(c.data);
  // MPI forbids overlapping send and receive buffers except via MPI_IN_PLACE.
  const bool in_place = send == recv + rank_ * c.bytes();
  if (c.count <= max_per_call) {
    const int n = static_cast<int>(c.count);
    MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, comm_.get()))
        << Context(c);
    return;
  }
  // Each call moves elements [offset, offset + n) of every rank's block. The
  // receive type is n elements with an extent of a whole block, so rank r's
  // piece lands at recv + r * count + offset; extents are MPI_Aint, so no
  // int overflows however large the blocks.
  for (int64_t offset = 0; offset < c.count; offset += max_per_call) {
    const int n = static_cast<int>(std::min(max_per_call, c.count - offset));
    ScopedType piece, strided;
    MPI_CHECK(MPI_Type_contiguous(n, type, &piece.type)) << Context(c);
    MPI_CHECK(MPI_Type_create_resized(piece.type, 0, static_cast<MPI_Aint>(c.bytes()),
                                      &strided.type))
        << Context(c);
    MPI_CHECK(MPI_Type_commit(&strided.type)) << Context(c);
    MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send + offset * element, n, type,
                            recv + offset * element, 1, strided.type, comm_.get()))
        << Context(c);
  }
}

// Note [ReduceScatter over MPI]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A ReduceScatter is size() MPI_Reduce calls, rank r the root of block r,
// rather than one MPI_Reduce_scatter_block: that call's MPI_IN_PLACE takes
// the input from recv and leaves the result at its start, which is not the
// in-place form of Communicator::ReduceScatter (recv = send + rank *
// count), and a block of more than max_elements_per_call elements could
// only be cut into pieces with a strided datatype, which Open MPI's MPI_SUM
// refuses. A rooted reduce has both: MPI_IN_PLACE at the root is exactly
// that form, and each block is split like an all-reduce. The price is
// size() calls in turn instead of one; the sum is MPI's, then one multiply
// by 1/N for kAverage, as RunAllReduce. bfloat16 is widened and rounded once,
// as in Note [bfloat16 over MPI].
void MpiCommunicator::RunReduceScatter(const Collective& c, int64_t max_per_call) {
  if (c.dtype == DType::kBFloat16) {
    RunBFloat16ReduceScatter(c, max_per_call);
    return;
  }
  const float* send = static_cast<const float*>(c.send);
  float* recv = static_cast<float*>(c.data);
  const bool in_place = send + rank_ * c.count == recv;
  for (int root = 0; root < size_; ++root) {
    for (int64_t offset = 0; offset < c.count; offset += max_per_call) {
      const int n = static_cast<int>(std::min(max_per_call, c.count - offset));
      const void* block = send + root * c.count + offset;
      // recv is read at the root only.
      MPI_CHECK(MPI_Reduce(root == rank_ && in_place ? MPI_IN_PLACE : block, recv + offset, n,
                           MPI_FLOAT, MPI_SUM, root, comm_.get()))
          << Context(c);
    }
  }
  if (c.op == ReduceOp::kAverage) {
    const float scale = 1.0f / size_;
    for (int64_t i = 0; i < c.count; ++i) recv[i] *= scale;
  }
}

// See Note [ReduceScatter over MPI]: every block widened, reduced in place
// in widened_, and this rank's block rounded into recv.
void MpiCommunicator::RunBFloat16ReduceScatter(const Collective& c, int64_t max_per_call) {
  const uint16_t* send = static_cast<const uint16_t*>(c.send);
  const int64_t total = size_ * c.count;
  widened_.resize(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) widened_[i] = BFloat16BitsToFloat(send[i]);
  Collective wide = c;
  wide.dtype = DType::kFloat32;
  wide.send = widened_.data();
  float* mine = widened_.data() + rank_ * c.count;
  wide.data = mine;
  RunReduceScatter(wide, max_per_call);
  uint16_t* recv = static_cast<uint16_t*>(c.data);
  for (int64_t i = 0; i < c.count; ++i) recv[i] = FloatToBFloat16Bits(mine[i]);
}

void MpiCommunicator::Abort(const std::string& reason) {
  std::cerr << reason << std::endl;
  MPI_Abort(comm_.get(), 1);
  // MPI_Abort does not return in Open MPI; be sure nobody waits if it did.
  std::_Exit(1);
}

NodePlace PlaceOnNode(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  internal::OwnedMpiComm node;
  // Key = world rank keeps the node-local order the same as the global one.
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                node.out()));
  NodePlace place;
  MPI_CHECK(MPI_Comm_rank(node.get(), &place.local_rank));
  MPI_CHECK(MPI_Comm_size(node.get(), &place.local_size));
  return place;
}

int LocalRank(MPI_Comm comm) { return PlaceOnNode(comm).local_rank; }

}  // namespace tandem
