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

const char* ToString(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "AllReduce";
    case CollectiveKind::kBroadcast: return "Broadcast";
    case CollectiveKind::kBarrier: return "Barrier";
    case CollectiveKind::kAllGather: return "AllGather";
    case CollectiveKind::kWindowRegister: return "WindowRegister";
    case CollectiveKind::kReduceScatter: return "ReduceScatter";
  }
  return "?";
}

std::string Collective::Name() const {
  std::string text = std::string(ToString(kind)) + " #" + std::to_string(sequence) + " (" +
                     std::to_string(bytes()) + " bytes";
  if (dtype != DType::kFloat32) text += std::string(", ") + DTypeName(dtype);
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter) {
    text += std::string(", ") + ToString(op);
  }
  if (kind == CollectiveKind::kBroadcast) text += ", root " + std::to_string(root);
  if (!options.label.empty()) text += ", " + options.label;
  return text + ")";
}

std::shared_ptr<Work> Communicator::AllReduce(float* data, int64_t count, ReduceOp op,
                                              CollectiveOptions options) {
  return AllReduce(Ptr{data, DType::kFloat32}, count, op, std::move(options));
}

std::shared_ptr<Work> Communicator::Broadcast(float* data, int64_t count, int root,
                                              CollectiveOptions options) {
  return Broadcast(Ptr{data, DType::kFloat32}, count, root, std::move(options));
}

std::shared_ptr<Work> Communicator::AllGather(const float* send, int64_t count_per_rank,
                                              float* recv, CollectiveOptions options) {
  return AllGather(CPtr(send, DType::kFloat32), count_per_rank, Ptr{recv, DType::kFloat32},
                   std::move(options));
}

std::shared_ptr<Work> Communicator::ReduceScatter(const float* send, int64_t count_per_rank,
                                                  float* recv, ReduceOp op,
                                                  CollectiveOptions options) {
  return ReduceScatter(CPtr(send, DType::kFloat32), count_per_rank, Ptr{recv, DType::kFloat32},
                       op, std::move(options));
}

std::shared_ptr<Work> Communicator::AllReduce(Ptr data, int64_t count, ReduceOp op,
                                              CollectiveOptions options) {
  Collective c;
  c.kind = CollectiveKind::kAllReduce;
  c.count = count;
  c.dtype = data.dtype;
  c.op = op;
  c.data = data.data;
  c.options = std::move(options);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::Broadcast(Ptr data, int64_t count, int root,
                                              CollectiveOptions options) {
  Collective c;
  c.kind = CollectiveKind::kBroadcast;
  c.count = count;
  c.dtype = data.dtype;
  c.root = root;
  c.data = data.data;
  c.options = std::move(options);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::Barrier() {
  Collective c;
  c.kind = CollectiveKind::kBarrier;
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::AllGather(CPtr send, int64_t count_per_rank, Ptr recv,
                                              CollectiveOptions options) {
  Collective c;
  c.kind = CollectiveKind::kAllGather;
  c.count = count_per_rank;
  c.dtype = recv.dtype;
  c.send = send.data;
  c.data = recv.data;
  c.options = std::move(options);
  CheckOneDType(c.kind, count_per_rank, send.dtype, recv.dtype);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::ReduceScatter(CPtr send, int64_t count_per_rank, Ptr recv,
                                                  ReduceOp op, CollectiveOptions options) {
  Collective c;
  c.kind = CollectiveKind::kReduceScatter;
  c.count = count_per_rank;
  c.dtype = recv.dtype;
  c.op = op;
  c.send = send.data;
  c.data = recv.data;
  c.options = std::move(options);
  CheckOneDType(c.kind, count_per_rank, send.dtype, recv.dtype);
  return Issue(std::move(c));
}

std::shared_ptr<Work> Communicator::AllReduce(const Tensor& data, ReduceOp op,
                                              CollectiveOptions options) {
  return AllReduce(data.ptr(), data.numel(), op, std::move(options));
}

std::shared_ptr<Work> Communicator::Broadcast(const Tensor& data, int root,
                                              CollectiveOptions options) {
  return Broadcast(data.ptr(), data.numel(), root, std::move(options));
}

std::shared_ptr<Work> Communicator::AllGather(const Tensor& send, const Tensor& recv,
                                              CollectiveOptions options) {
  TANDEM_CHECK(recv.numel() == size() * send.numel())
      << Describe() << ": AllGather of " << send.numel() << " elements per rank over " << size()
      << " ranks needs a recv of " << size() * send.numel() << " elements, got "
      << ShapeToString(recv.shape());
  return AllGather(CPtr(send.ptr()), send.numel(), recv.ptr(), std::move(options));
}

std::shared_ptr<Work> Communicator::ReduceScatter(const Tensor& send, const Tensor& recv,
                                                  ReduceOp op, CollectiveOptions options) {
  TANDEM_CHECK(send.numel() == size() * recv.numel())
      << Describe() << ": ReduceScatter of " << recv.numel() << " elements per rank over "
      << size() << " ranks needs a send of " << size() * recv.numel() << " elements, got "
      << ShapeToString(send.shape());
  return ReduceScatter(CPtr(send.ptr()), recv.numel(), recv.ptr(), op, std::move(options));
}

std::string Communicator::Context(const Collective& c) const {
  return Describe() + ": " + c.Name();
}

Collective Communicator::Announce(CollectiveKind kind, int64_t count, DType dtype) {
  Collective c;
  c.kind = kind;
  c.count = count;
  c.dtype = dtype;
  c.sequence = ++sequence_;
  if (channel_ != nullptr) {
    CheckFingerprint(*channel_, {static_cast<int64_t>(c.sequence), FingerprintKind(kind), count,
                                 FingerprintDType(dtype)});
  }
  return c;
}

// See Note [Collective preamble].
std::shared_ptr<Work> Communicator::Issue(Collective c) {
  const Collective numbered = Announce(c.kind, c.count, c.dtype);
  c.sequence = numbered.sequence;
  TANDEM_CHECK(c.count >= 0) << Context(c) << ": the count must not be negative";
  if (c.kind == CollectiveKind::kBroadcast) {
    TANDEM_CHECK(c.root >= 0 && c.root < size())
        << Context(c) << ": root " << c.root << " is not a rank";
  }
  if (c.kind == CollectiveKind::kAllGather) CheckBlockOverlap(c, c.send, c.data);
  if (c.kind == CollectiveKind::kReduceScatter) CheckBlockOverlap(c, c.data, c.send);
  return Start(c);
}

void Communicator::CheckOneDType(CollectiveKind kind, int64_t count_per_rank, DType send,
                                 DType recv) const {
  TANDEM_CHECK(send == recv) << Describe() << ": " << ToString(kind) << " of " << count_per_rank
                             << " elements per rank: send is " << DTypeName(send)
                             << " but recv is " << DTypeName(recv)
                             << "; both must have one dtype";
}

void Communicator::CheckBlockOverlap(const Collective& c, const void* part,
                                     const void* whole) const {
  if (c.count == 0) return;
  const char* block_start = static_cast<const char*>(part);
  const char* all = static_cast<const char*>(whole);
  const int64_t block = c.bytes();
  const bool send_is_part = c.kind == CollectiveKind::kAllGather;
  TANDEM_CHECK(block_start == all + rank() * block || block_start + block <= all ||
               block_start >= all + size() * block)
      << Context(c) << ": " << (send_is_part ? "send overlaps recv" : "recv overlaps send")
      << " without being this rank's block of it (" << (send_is_part ? "recv" : "send")
      << " + " << rank() << " * " << c.count << ")";
}

Tensor Communicator::NewReduceBuffer(int64_t count, Device device) {
  TANDEM_CHECK(device.is_cpu())
      << Describe() << " reduces host memory, and cannot reduce a buffer on " << device
      << ": data parallelism on GPUs needs a device communicator (NCCL)";
  return Tensor::Zeros({count}, device);
}

Tensor Communicator::NewReduceBuffer(int64_t count, Device device, DType dtype) {
  if (dtype == DType::kFloat32) return NewReduceBuffer(count, device);
  TANDEM_CHECK(count >= 0) << Describe() << ": a reduce buffer of " << count << " elements";
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  const int64_t floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  // Also checks the device, as the float32 form does.
  Tensor words = NewReduceBuffer(floats, device);
  if (count == 0) return Tensor::Zeros({0}, device, dtype);
  // The view keeps `words` (and whatever registered it) alive.
  return Tensor::Wrap(words.raw_data(), {count}, device, [words]() {}, dtype);
}

}  // namespace tandem
