#include "parallel/communicator.h"

#include <utility>

#include "parallel/collective_fingerprint.h"

namespace tandem {

// Note [Collective preamble]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every collective of every transport passes through Issue, on the calling
// thread, before the transport sees it: the counts are checked, the
// collective gets this rank's next sequence number (errors name it "#n"),
// and in debug mode its fingerprint is compared with every other rank's
// over the fingerprint channel. Numbering at issue, not at completion, keeps
// the numbers the same on every rank whatever each transport's progress.
// The transport's Start then only runs it.

std::string Collective::Name() const {
  std::string text = std::string(kind) + " #" + std::to_string(sequence) + " (" +
                     std::to_string(count * static_cast<int64_t>(sizeof(float))) +
                     " bytes";
  if (std::string(kind) == "AllReduce") text += std::string(", ") + ToString(op);
  if (std::string(kind) == "Broadcast") text += ", root " + std::to_string(root);
  return text + ")";
}

std::shared_ptr<Work> Communicator::AllReduce(float* data, int64_t count, ReduceOp op,
                                              CollectiveOptions options) {
  Collective c;
  c.kind = "AllReduce";
  c.count = count;
  c.op = op;
  c.data = data;
  c.options = std::move(options);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::Broadcast(float* data, int64_t count, int root,
                                              CollectiveOptions options) {
  Collective c;
  c.kind = "Broadcast";
  c.count = count;
  c.root = root;
  c.data = data;
  c.options = std::move(options);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::Barrier() {
  Collective c;
  c.kind = "Barrier";
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::AllGather(const float* send, int64_t count_per_rank,
                                              float* recv, CollectiveOptions options) {
  Collective c;
  c.kind = "AllGather";
  c.count = count_per_rank;
  c.send = send;
  c.data = recv;
  c.options = std::move(options);
  return Issue(std::move(c));
}

std::string Communicator::Context(const Collective& c) const {
  return Describe() + ": " + c.Name();
}

Collective Communicator::Announce(const char* kind, int64_t count) {
  Collective c;
  c.kind = kind;
  c.count = count;
  c.sequence = ++sequence_;
  if (channel_ != nullptr) {
    CheckFingerprint(*channel_, {static_cast<int64_t>(c.sequence), FingerprintKind(kind), count});
  }
  return c;
}

// See Note [Collective preamble].
std::shared_ptr<Work> Communicator::Issue(Collective c) {
  const Collective numbered = Announce(c.kind, c.count);
  c.sequence = numbered.sequence;
  TANDEM_CHECK(c.count >= 0) << Context(c) << ": the count must not be negative";
  if (std::string(c.kind) == "Broadcast") {
    TANDEM_CHECK(c.root >= 0 && c.root < size())
        << Context(c) << ": root " << c.root << " is not a rank";
  }
  if (std::string(c.kind) == "AllGather" && c.count > 0) {
    const float* in_place = c.data + rank() * c.count;
    TANDEM_CHECK(c.send == in_place || c.send + c.count <= c.data ||
                 c.send >= c.data + size() * c.count)
        << Context(c) << ": send overlaps recv without being this rank's block of it (recv + "
        << rank() << " * " << c.count << ")";
  }
  return Start(c);
}

Tensor Communicator::NewReduceBuffer(int64_t count, Device device) {
  TANDEM_CHECK(device.is_cpu())
      << Describe() << " reduces host memory, and cannot reduce a buffer on " << device
      << ": data parallelism on GPUs needs a device communicator (NCCL)";
  return Tensor::Zeros({count}, device);
}

}  // namespace tandem
