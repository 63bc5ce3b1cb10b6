// Communicator: the collectives data-parallel training needs, one interface
// for every transport (threads of one process, MPI ranks, NCCL on GPUs).
//
// Every collective returns a Work (parallel/work.h; dropping it is a compile
// error): it has started when the call returns, and the caller waits for it on the host (Wait) or makes a
// lane wait for it (WaitOn). Every rank calls the same collectives with the
// same counts in the same order, as in MPI; a rank that skips or reorders one
// makes the others wait until a timeout names it. One thread at a time
// issues collectives on one communicator.
//
//   void Step(Communicator& comm, std::vector<float>& grads) {
//     comm.AllReduce(grads.data(), grads.size(), ReduceOp::kAverage)->Wait();
//     if (comm.rank() == 0) std::cout << comm.Describe() << "\n";
//   }
//
// The public collectives are one preamble shared by every transport (Note
// [Collective preamble] in communicator.cc): counts checked, the collective
// numbered and named for errors ("AllReduce #3 (4000 bytes, sum)"), and in
// debug mode compared across ranks (set_fingerprint_channel); then the
// transport's Start runs it. Host transports (ThreadCommunicator,
// MpiCommunicator) run collectives in order on a progress thread of their
// own (parallel/collective_queue.h); NcclCommunicator queues them on its
// communication lane.
//
// Element types. Collectives move float32 (the float* forms) or any dtype of
// core/dtype.h (the Ptr forms, and the Tensor forms, which take the whole
// tensor); every transport supports bfloat16, which halves the bytes:
//
//   Tensor g16 = Tensor::Empty({n}, device, DType::kBFloat16);
//   ops::Cast(lane, grads, g16);                       // round to bfloat16
//   comm.AllReduce(g16.ptr(), n, ReduceOp::kSum, {{lane}})->WaitOn(lane);
//   comm.AllReduce(g16, ReduceOp::kSum)->Wait();       // the same, whole tensor
//
// Every rank passes the same dtype; with fingerprints on, a rank that does
// not is named like one that passed another count.
//
// Counts and bytes. Every count is a number of elements, never bytes, and may
// be 0 or any value (it need not divide by size()). Error messages give the
// size of a collective in bytes = count * SizeOf(dtype) as passed by the
// calling rank, and the dtype unless it is float32 ("AllReduce #3 (2000
// bytes, bfloat16, sum)"): for AllGather that is what each rank contributes
// (it receives size() times as much), for ReduceScatter what each rank
// receives (it sends size() times as much). Barrier is 0 bytes.
//
// Results. AllReduce writes the same bits on every rank. ThreadCommunicator
// also fixes the order of the sum (see Note [Fixed reduction order] in
// thread_communicator.cc); kAverage is the sum multiplied by 1.0f / size(),
// on every communicator, so averages match across transports for sums that
// are exact. bfloat16 all-reduces add in float32 and round the result to
// bfloat16 once on the host transports (so a bfloat16 sum is the float32 sum
// of the inputs, rounded); NCCL adds in its own order and precision (see
// nccl_communicator.h). ReduceScatter sums as AllReduce does: rank r's recv
// holds what AllReduce would leave in block r of its buffer (the same bits on
// the host transports). Broadcast and AllGather copy elements bit for bit.
#ifndef TANDEM_PARALLEL_COMMUNICATOR_H_
#define TANDEM_PARALLEL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/lane.h"
#include "core/tensor.h"
#include "parallel/work.h"

namespace tandem {

enum class ReduceOp { kSum, kAverage };

inline const char* ToString(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : "average";
}

// Thrown by a collective because the group was aborted (a rank called
// Abort, or another rank failed or timed out). It is a consequence, not a
// cause: the launcher reports the original failure in preference to it.
// Its text is "collective aborted: <reason>".
class CollectiveAbortedError : public Error {
 public:
  using Error::Error;
};

struct CollectiveOptions {
  // Device transports: the collective starts after what these lanes (of the
  // communicator's device) have queued so far; empty means that device's
  // main lane. Host transports read host memory that is ready when the call
  // is made, and ignore it.
  std::vector<Lane> after;
  // Record Work::started() and Work::finished().
  bool timed = false;
  // What the caller calls this collective ("gradient bucket 3"), for errors
  // and the watchdog's messages; may be empty.
  std::string label = "";
};

// What a collective does. kWindowRegister is NCCL's own: the buffer
// registration every rank makes together (parallel/nccl_reduce_buffer.cc),
// numbered and compared like the others but never handed to Start. The
// values travel in fingerprints, so new kinds go at the end.
enum class CollectiveKind {
  kAllReduce,
  kBroadcast,
  kBarrier,
  kAllGather,
  kWindowRegister,
  kReduceScatter,
};
inline constexpr int kNumCollectiveKinds = 6;
// "AllReduce", "Broadcast", "Barrier", "AllGather", "WindowRegister",
// "ReduceScatter": for errors and the watchdog's messages.
const char* ToString(CollectiveKind kind);

// One collective, as the preamble hands it to a transport.
struct Collective {
  CollectiveKind kind = CollectiveKind::kBarrier;
  uint64_t sequence = 0;     // this rank's collectives, from 1
  int64_t count = 0;         // elements (AllGather, ReduceScatter: per rank)
  DType dtype = DType::kFloat32;  // of data and send
  ReduceOp op = ReduceOp::kSum;  // AllReduce, ReduceScatter
  int root = -1;             // Broadcast
  // AllReduce, Broadcast: in place; AllGather, ReduceScatter: recv.
  void* data = nullptr;
  const void* send = nullptr;  // AllGather, ReduceScatter
  CollectiveOptions options;

  // count * SizeOf(dtype).
  int64_t bytes() const { return count * static_cast<int64_t>(SizeOf(dtype)); }
  // "AllReduce #3 (4000 bytes, sum)"; "AllReduce #3 (2000 bytes, bfloat16,
  // sum)" for another dtype than float32; "..., sum, gradient bucket 1)"
  // with a label.
  std::string Name() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank, in [0, size()).
  virtual int rank() const = 0;
  // The number of ranks.
  virtual int size() const = 0;
  // Whether every rank runs on this rank's node (threads of one process
  // always do; MPI ranks when the job has one node). Transports tuned for
  // one node (NCCL's symmetric memory) are used only then.
  virtual bool single_node() const { return true; }

  // In place: afterwards data[0, count) holds the element-wise sum (or
  // average) over all ranks, identical on every rank.
  [[nodiscard]] std::shared_ptr<Work> AllReduce(float* data, int64_t count, ReduceOp op,
                                  CollectiveOptions options = {});
  // Copies root's data[0, count) into every other rank's data.
  [[nodiscard]] std::shared_ptr<Work> Broadcast(float* data, int64_t count, int root,
                                  CollectiveOptions options = {});
  // Done once every rank has entered it.
  [[nodiscard]] std::shared_ptr<Work> Barrier();
  // recv[size() * count_per_rank] receives every rank's send[count_per_rank],
  // rank-major: rank r's block starts at recv + r * count_per_rank. `send`
  // may be exactly recv + rank() * count_per_rank (in place); otherwise the
  // two must not overlap.
  [[nodiscard]] std::shared_ptr<Work> AllGather(const float* send, int64_t count_per_rank,
                                  float* recv, CollectiveOptions options = {});
  // The reverse of AllGather, summing, as NCCL's ncclReduceScatter:
  // send[size() * count_per_rank] holds one block per rank, rank-major, and
  // recv[count_per_rank] receives the element-wise sum (or average) over all
  // ranks of their block rank(). `recv` may be exactly send + rank() *
  // count_per_rank (in place); otherwise the two must not overlap.
  [[nodiscard]] std::shared_ptr<Work> ReduceScatter(const float* send, int64_t count_per_rank,
                                                    float* recv, ReduceOp op,
                                                    CollectiveOptions options = {});

  // The same over elements of data.dtype (float32 or bfloat16).
  [[nodiscard]] std::shared_ptr<Work> AllReduce(Ptr data, int64_t count, ReduceOp op,
                                                CollectiveOptions options = {});
  [[nodiscard]] std::shared_ptr<Work> Broadcast(Ptr data, int64_t count, int root,
                                                CollectiveOptions options = {});
  // send and recv share one dtype.
  [[nodiscard]] std::shared_ptr<Work> AllGather(CPtr send, int64_t count_per_rank, Ptr recv,
                                                CollectiveOptions options = {});
  [[nodiscard]] std::shared_ptr<Work> ReduceScatter(CPtr send, int64_t count_per_rank, Ptr recv,
                                                    ReduceOp op, CollectiveOptions options = {});

  // The same over whole tensors, in the memory this communicator reduces
  // (the host, or its GPU). AllGather's recv holds size() * send.numel()
  // elements of send's dtype; ReduceScatter's send holds size() *
  // recv.numel() elements of recv's dtype.
  [[nodiscard]] std::shared_ptr<Work> AllReduce(const Tensor& data, ReduceOp op,
                                                CollectiveOptions options = {});
  [[nodiscard]] std::shared_ptr<Work> Broadcast(const Tensor& data, int root,
                                                CollectiveOptions options = {});
  [[nodiscard]] std::shared_ptr<Work> AllGather(const Tensor& send, const Tensor& recv,
                                                CollectiveOptions options = {});
  [[nodiscard]] std::shared_ptr<Work> ReduceScatter(const Tensor& send, const Tensor& recv,
                                                    ReduceOp op, CollectiveOptions options = {});

  // One line for logs: "ThreadCommunicator(rank 1 of 4)".
  virtual std::string Describe() const = 0;

  // Gives up on the group because this rank cannot go on. Transports that
  // can wake blocked ranks do (every collective in progress or started
  // later fails with CollectiveAbortedError); those that cannot (MPI) end
  // the whole job, so nobody waits forever.
  virtual void Abort(const std::string& reason) = 0;

  // A zeroed buffer of `count` floats on `device` for this communicator's
  // all-reduces; NCCL may hand out memory it reduces faster. Throws for a
  // device whose memory this communicator cannot reduce (host transports:
  // every GPU).
  virtual Tensor NewReduceBuffer(int64_t count, Device device);
  // The same for `count` elements of `dtype`: for another dtype than
  // float32, a view of the bytes of a float buffer from the overload above
  // (rounded up to whole floats), so it is the same kind of memory. Every
  // rank asks for the same buffers in the same order (NCCL registers them
  // collectively).
  Tensor NewReduceBuffer(int64_t count, Device device, DType dtype);

  // How many collectives this rank has issued; errors number them from 1.
  uint64_t sequence() const { return sequence_; }

  // Debug mode: before each collective every rank exchanges its (sequence,
  // kind, count, dtype) over `channel` (another communicator over the same
  // ranks, which must outlive this one's use) and, if any rank differs,
  // every rank throws naming who called what (parallel/
  // collective_fingerprint.h), instead of pairing mismatched buffers or
  // hanging. The host then waits for its peers at every collective. nullptr
  // turns it off (the default).
  void set_fingerprint_channel(Communicator* channel) { channel_ = channel; }

 protected:
  // Runs `c`, already checked, numbered and compared; returns its Work.
  virtual std::shared_ptr<Work> Start(const Collective& c) = 0;
  // Numbers (and in debug mode compares across ranks) a collective of the
  // transport's own, outside the five above (NCCL's window registration).
  Collective Announce(CollectiveKind kind, int64_t count, DType dtype = DType::kFloat32);
  // "<Describe()>: <c.Name()>", for errors.
  std::string Context(const Collective& c) const;

 private:
  std::shared_ptr<Work> Issue(Collective c);
  // Throws unless send and recv of a collective between two buffers share
  // one dtype; before numbering, so no rank has started anything.
  void CheckOneDType(CollectiveKind kind, int64_t count_per_rank, DType send, DType recv) const;
  // Throws if the per-rank block `part` (AllGather's send, ReduceScatter's
  // recv) overlaps `whole` (size() blocks) other than as block rank().
  void CheckBlockOverlap(const Collective& c, const void* part, const void* whole) const;

  uint64_t sequence_ = 0;
  Communicator* channel_ = nullptr;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COMMUNICATOR_H_
