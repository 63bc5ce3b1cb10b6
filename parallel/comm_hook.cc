#include "parallel/comm_hook.h"

#include <algorithm>
#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"

namespace tandem {

// Note [bfloat16 compression]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// BFloat16CompressionHook keeps a bfloat16 buffer per bucket (from the
// bucket's communicator, so NCCL may hand out memory it reduces faster) and
// two lanes of the buckets' device. For each bucket, each step:
//   1. Reduce: the compress lane waits for `ready` (backward's lanes, which
//      wrote the gradients) and casts bucket.buffer into the bfloat16
//      buffer; the all-reduce (a sum) of that buffer follows the compress
//      lane (CollectiveOptions::after).
//   2. AfterReduce: the decompress lane waits for the all-reduce
//      (Work::WaitOn) and casts the sum back into bucket.buffer.
//   3. WaitForGradients(lane) and FinishStep(lane): `lane` waits for the
//      decompress lane, so whoever reads the gradients after the hook
//      (OptimizerUpdateHook's lane; Step on the caller's lane) reads the
//      final float32 values.
// Two lanes, not one: a compress queued behind a decompress would wait for
// that bucket's all-reduce, and the next bucket's all-reduce (perhaps on
// another communicator, Note [Communicators] in reducer.cc) could not start before
// the previous one had finished.
// Within a step each bfloat16 buffer is written by the compress, then read
// and written by the all-reduce, then read by the decompress, each after
// the one before. Across steps the next compress must not overwrite a
// buffer the decompress still reads, so FinishStep also makes the compress
// lane wait for the decompress lane. bucket.buffer is read by the compress
// and written by the decompress, which follows it through the all-reduce;
// the next backward writes it only after FinishStep's `lane` (the reducer's
// caller's) has waited.
// On the CPU every lane is the calling thread: WaitOn waits on the host for
// the progress thread's all-reduce and the casts run at once. On a GPU
// every ordering is an event wait; the host does not wait.

std::shared_ptr<Work> CommHook::Reduce(const GradBucket& bucket,
                                       const std::vector<Lane>& ready, bool timed) {
  CollectiveOptions options;
  options.after = ready;
  options.timed = timed;
  options.label = "gradient bucket " + std::to_string(bucket.index);
  // See Note [Gradient averaging] in reducer.cc: a sum, not an average.
  Tensor buffer = bucket.buffer;
  return bucket.comm->AllReduce(buffer.data(), buffer.numel(), ReduceOp::kSum,
                                std::move(options));
}

void CommHook::WaitForGradients(const GradBucket& bucket, Work& work, const Lane& lane) {
  work.WaitOn(lane);
}

// ---------------------------------------------------------------------------
// BFloat16CompressionHook

void BFloat16CompressionHook::Bind(const std::vector<GradBucket>& buckets) {
  compressed_.clear();
  stage_.assign(buckets.size(), Stage::kIdle);
  if (buckets.empty()) return;
  const Device device = buckets[0].buffer.device();
  for (const GradBucket& bucket : buckets) {
    const std::string first =
        bucket.parameters.empty() ? std::string("none") : bucket.parameters[0].name;
    TANDEM_CHECK(bucket.buffer.dtype() == DType::kFloat32)
        << "BFloat16CompressionHook compresses float32 gradients, but bucket " << bucket.index
        << " (parameter '" << first << "' first) holds " << DTypeName(bucket.buffer.dtype())
        << " ones: register it only over float32 gradients";
    TANDEM_CHECK(bucket.buffer.device() == device)
        << "BFloat16CompressionHook: bucket " << bucket.index << " (parameter '" << first
        << "' first) is on " << bucket.buffer.device() << " but bucket 0 is on " << device
        << ": a replica's parameters must share one device";
    const int64_t n = bucket.buffer.numel();
    // One rank reduces nothing (the reducer does not call Reduce), so it
    // needs no buffer.
    compressed_.push_back(bucket.comm->size() == 1
                              ? Tensor()
                              : bucket.comm->NewReduceBuffer(n, device, DType::kBFloat16));
  }
  Backend& backend = GetBackend(device);
  compress_ = backend.NewLane({"bf16 compress", /*high_priority=*/true});
  decompress_ = backend.NewLane({"bf16 decompress", /*high_priority=*/true});
  // The buffers were zeroed on the main lane: the compress lane, their
  // first writer, follows that.
  ops::WaitFor(compress_.get(), backend.main_lane());
}

// See Note [bfloat16 compression].
std::shared_ptr<Work> BFloat16CompressionHook::Reduce(const GradBucket& bucket,
                                                      const std::vector<Lane>& ready,
                                                      bool timed) {
  const size_t b = static_cast<size_t>(bucket.index);
  TANDEM_CHECK(b < compressed_.size() && compress_.valid())
      << "BFloat16CompressionHook: bucket " << bucket.index
      << " was not bound; register the hook with Reducer::RegisterCommHook";
  Tensor& half = compressed_[b];
  if (!half.defined()) {
    half = Tensor::Zeros({bucket.buffer.numel()}, bucket.buffer.device(), DType::kBFloat16);
    ops::WaitFor(compress_.get(), bucket.buffer.backend().main_lane());
  }
  const Lane compress = compress_.get();
  for (const Lane& producer : ready) ops::WaitFor(compress, producer);
  ops::Cast(compress, bucket.buffer, half);
  stage_[b] = Stage::kReducing;
  CollectiveOptions options;
  options.after = {compress};
  options.timed = timed;
  options.label = "gradient bucket " + std::to_string(bucket.index);
  // See Note [Gradient averaging] in reducer.cc: a sum, not an average.
  return bucket.comm->AllReduce(half, ReduceOp::kSum, std::move(options));
}

void BFloat16CompressionHook::AfterReduce(const GradBucket& bucket, Work& work,
                                          const std::vector<Lane>& compute) {
  const size_t b = static_cast<size_t>(bucket.index);
  // Not reduced (one rank): the gradients are final as they are.
  if (b >= stage_.size() || stage_[b] != Stage::kReducing) return;
  const Lane decompress = decompress_.get();
  work.WaitOn(decompress);
  Tensor gradients = bucket.buffer;
  ops::Cast(decompress, compressed_[b], gradients);
  stage_[b] = Stage::kRestored;
}

void BFloat16CompressionHook::WaitForGradients(const GradBucket& bucket, Work& work,
                                               const Lane& lane) {
  const size_t b = static_cast<size_t>(bucket.index);
  if (b < stage_.size() && stage_[b] == Stage::kRestored) {
    ops::WaitFor(lane, decompress_.get());
  } else {
    work.WaitOn(lane);
  }
}

void BFloat16CompressionHook::FinishStep(const Lane& lane) {
  std::fill(stage_.begin(), stage_.end(), Stage::kIdle);
  if (!decompress_.valid()) return;  // no buckets
  ops::WaitFor(lane, decompress_.get());
  // The next step's casts overwrite buffers this step's decompress reads.
  ops::WaitFor(compress_.get(), decompress_.get());
}

// ---------------------------------------------------------------------------
// OptimizerUpdateHook

OptimizerUpdateHook::OptimizerUpdateHook(Optimizer& optimizer, std::unique_ptr<CommHook> reduce)
    : optimizer_(optimizer),
      reduce_(reduce != nullptr ? std::move(reduce) : std::make_unique<CommHook>()) {}

void OptimizerUpdateHook::Bind(const std::vector<GradBucket>& buckets) {
  const std::vector<NamedParameter>& theirs = optimizer_.parameters();
  size_t held = 0;
  indices_.clear();
  for (const GradBucket& bucket : buckets) {
    std::vector<size_t> indices;
    for (const NamedParameter& p : bucket.parameters) {
      size_t j = 0;
      while (j < theirs.size() && theirs[j].parameter != p.parameter) ++j;
      TANDEM_CHECK(j < theirs.size())
          << "optimizer '" << optimizer_.Name() << "' does not hold parameter '"
          << p.name << "': build it over the model's Parameters()";
      indices.push_back(j);
    }
    held += indices.size();
    indices_.push_back(std::move(indices));
  }
  TANDEM_CHECK(held == theirs.size())
      << "optimizer '" << optimizer_.Name() << "' holds " << theirs.size()
      << " parameters but the model has " << held
      << ": build it over the model's Parameters()";
  reduce_->Bind(buckets);
  if (!buckets.empty()) {
    lane_ = GetBackend(buckets[0].buffer.device()).NewLane({"optimizer", true});
  }
}

std::shared_ptr<Work> OptimizerUpdateHook::Reduce(const GradBucket& bucket,
                                                  const std::vector<Lane>& ready, bool timed) {
  return reduce_->Reduce(bucket, ready, timed);
}

// See Note [Per-bucket update] in reducer.cc.
void OptimizerUpdateHook::AfterReduce(const GradBucket& bucket, Work& work,
                                      const std::vector<Lane>& compute) {
  reduce_->AfterReduce(bucket, work, compute);
  const Lane lane = lane_.get();
  reduce_->WaitForGradients(bucket, work, lane);
  // Backward's input-gradient GEMMs read these weights: after them.
  for (const Lane& c : compute) ops::WaitFor(lane, c);
  optimizer_.UpdateParameters(indices_.at(bucket.index), lane);
}

void OptimizerUpdateHook::WaitForGradients(const GradBucket& bucket, Work& work,
                                           const Lane& lane) {
  reduce_->WaitForGradients(bucket, work, lane);
}

void OptimizerUpdateHook::FinishStep(const Lane& lane) {
  reduce_->FinishStep(lane);
  if (lane_.valid()) ops::WaitFor(lane, lane_.get());
  optimizer_.FinishStep();
}

}  // namespace tandem
