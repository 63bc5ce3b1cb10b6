#include "parallel/deterministic_sum.h"

#include <string>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"

namespace tandem {

// Note [Deterministic sums]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Floating-point addition is commutative (a + b and b + a are the same bits)
// but not associative, so a sum of many terms is reproducible only if the
// terms are always grouped the same way. The gradient of a step is a sum
// over the examples of the global batch. In deterministic mode the batch is
// cut into P pieces (--micro_shards, a power of two) whatever the world size
// N, each piece's gradient is computed alone (the same rows, the same
// shapes, hence the same bits on any rank), and the P piece gradients are
// summed in one fixed binary tree: leaves 0..P-1, pairs (0+1), (2+3), ...,
// then pairs of pairs, up to the root. Rank r holds pieces
// [r * P/N, (r + 1) * P/N), a subtree when N is a power of two:
//   1. Within a rank (KeepLeaf, then Reduce): the pieces come one at a time,
//      and are added as a binary counter adds ones: a new leaf is added to
//      the kept sum of the same level (left + right), and the result carried
//      up while that level is taken, so at most log2(P/N) sums are kept.
//      The last piece's gradients are added to the kept sums, lowest level
//      first, as each bucket is ready; its reduction then starts.
//   2. Across ranks (Reduce, AfterReduce): each bucket is all-gathered, and
//      every rank adds the N rank sums pairwise the same way: (r0 + r1),
//      (r2 + r3), then ((r0 + r1) + (r2 + r3)), ... Every rank computes the
//      same bits, as it adds the same numbers in the same order.
// With N = 1 the counter does all of it; with N = P every rank has one leaf
// and the rank tree does all of it. Either way the tree is the same, hence
// the bits. Padding elements (--shard_optimizer pads buckets per world
// size) are zeros that no parameter reads.
// Lanes: the hook's lane follows backward's (`ready`, `compute`) and the
// caller's lane after KeepLeaf; the all-gather follows the hook's lane, and
// whoever reads the gradients next (WaitForGradients, FinishStep) waits for
// the hook's lane.

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

void DeterministicSumHook::Bind(const std::vector<GradBucket>& buckets) {
  buffers_.clear();
  gathered_.clear();
  kept_.clear();
  occupied_.clear();
  if (buckets.empty()) return;
  size_ = buckets[0].comm->size();
  TANDEM_CHECK(IsPowerOfTwo(size_))
      << "deterministic sums (--deterministic) need a power-of-two number of workers, not "
      << size_ << ": the ranks' partial sums must be subtrees of one tree";
  const Device device = buckets[0].buffer.device();
  for (const GradBucket& bucket : buckets) {
    TANDEM_CHECK(bucket.buffer.dtype() == DType::kFloat32)
        << "DeterministicSumHook sums float32 gradients, but bucket " << bucket.index
        << " holds " << DTypeName(bucket.buffer.dtype()) << " ones";
    buffers_.push_back(bucket.buffer);
    // One rank reduces nothing (the reducer does not call Reduce).
    gathered_.push_back(size_ == 1 ? Tensor()
                                   : bucket.comm->NewReduceBuffer(
                                         size_ * bucket.buffer.numel(), device));
  }
  Backend& backend = GetBackend(device);
  lane_ = backend.NewLane({"deterministic sum", /*high_priority=*/true});
  ops::WaitFor(lane_.get(), backend.main_lane());
}

// See Note [Deterministic sums], 1.
void DeterministicSumHook::KeepLeaf(const Lane& lane) {
  TANDEM_CHECK(lane_.valid()) << "DeterministicSumHook: KeepLeaf before the hook was bound; "
                                 "register it with Reducer::RegisterCommHook first";
  const Lane sum = lane_.get();
  ops::WaitFor(sum, lane);
  size_t level = 0;
  for (; level < occupied_.size() && occupied_[level]; ++level) {
    for (size_t b = 0; b < buffers_.size(); ++b) {
      ops::Add(sum, kept_[level][b], buffers_[b], buffers_[b]);
    }
    occupied_[level] = false;
  }
  if (level == kept_.size()) {
    std::vector<Tensor> sums;
    for (const Tensor& buffer : buffers_) {
      sums.push_back(Tensor::Empty({buffer.numel()}, buffer.device()));
    }
    kept_.push_back(std::move(sums));
    occupied_.push_back(false);
  }
  for (size_t b = 0; b < buffers_.size(); ++b) kept_[level][b].CopyFrom(buffers_[b], sum);
  occupied_[level] = true;
  // The next piece's backward overwrites the gradients just kept.
  ops::WaitFor(lane, sum);
}

void DeterministicSumHook::AddKeptLeaves(const GradBucket& bucket, const Lane& lane) {
  Tensor gradients = bucket.buffer;
  for (size_t level = 0; level < occupied_.size(); ++level) {
    if (occupied_[level]) ops::Add(lane, kept_[level][bucket.index], gradients, gradients);
  }
}

std::shared_ptr<Work> DeterministicSumHook::Reduce(const GradBucket& bucket,
                                                   const std::vector<Lane>& ready, bool timed) {
  const size_t b = static_cast<size_t>(bucket.index);
  TANDEM_CHECK(b < gathered_.size() && gathered_[b].defined())
      << "DeterministicSumHook: bucket " << bucket.index
      << " was not bound; register the hook with Reducer::RegisterCommHook";
  const Lane sum = lane_.get();
  for (const Lane& producer : ready) ops::WaitFor(sum, producer);
  AddKeptLeaves(bucket, sum);
  CollectiveOptions options;
  options.after = {sum};
  options.timed = timed;
  options.label = "gradient bucket " + std::to_string(bucket.index) + " (deterministic gather)";
  return bucket.comm->AllGather(bucket.buffer, gathered_[b], std::move(options));
}

// See Note [Deterministic sums], 2.
void DeterministicSumHook::AfterReduce(const GradBucket& bucket, Work& work,
                                       const std::vector<Lane>& compute) {
  const Lane sum = lane_.get();
  if (size_ == 1) {
    for (const Lane& c : compute) ops::WaitFor(sum, c);
    AddKeptLeaves(bucket, sum);
    return;
  }
  work.WaitOn(sum);
  const int64_t n = bucket.buffer.numel();
  Tensor& rows = gathered_[static_cast<size_t>(bucket.index)];
  Tensor result = bucket.buffer;
  for (int stride = 1; stride < size_; stride *= 2) {
    for (int i = 0; i < size_; i += 2 * stride) {
      Tensor left = rows.Slice(i * n, (i + 1) * n);
      Tensor right = rows.Slice((i + stride) * n, (i + stride + 1) * n);
      Tensor out = 2 * stride == size_ ? result : left;
      ops::Add(sum, left, right, out);
    }
  }
}

void DeterministicSumHook::WaitForGradients(const GradBucket& bucket, Work& work,
                                            const Lane& lane) {
  ops::WaitFor(lane, lane_.get());
}

void DeterministicSumHook::FinishStep(const Lane& lane) {
  DropLeaves();
  if (lane_.valid()) ops::WaitFor(lane, lane_.get());
}

void DeterministicSumHook::DropLeaves() {
  occupied_.assign(occupied_.size(), false);
}

}  // namespace tandem
