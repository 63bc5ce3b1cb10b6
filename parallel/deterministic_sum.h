// Gradients summed in one fixed order whatever the number of workers, so
// that training gives bitwise the same parameters on 1, 2 or 4 workers
// (--deterministic). See Note [Deterministic sums] in deterministic_sum.cc.
//
//   // Every rank: the global batch in `micro_shards` pieces
//   // (MicroShardBlock in parallel/sharding.h), micro_shards / size of them here.
//   auto sum = std::make_unique<DeterministicSumHook>();
//   DeterministicSumHook* leaves = sum.get();
//   reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer, std::move(sum)));
//   for (int j = 0; j < pieces_here; ++j) {
//     loss.Forward(model.Forward(piece_x[j]), piece_y[j], global_batch);
//     BackwardArgs args = BackwardArgs::For(device);
//     args.grad_mode = GradMode::kOverwrite;             // each piece's own gradient
//     if (j + 1 < pieces_here) {
//       reducer.BackwardWith(loss.Backward(), args, GradientSync::kAccumulateLocally);
//       leaves->KeepLeaf(args.lane);                     // a leaf of the tree
//     } else {
//       reducer.BackwardWith(loss.Backward(), args);     // the last: summed, reduced
//     }
//   }
//
// The world size and the pieces per rank must be powers of two (so every
// rank's pieces form a subtree of the one tree). Cost: each rank keeps up to
// log2(pieces per rank) extra copies of the gradient and all-gathers each
// bucket (size x the bucket) instead of all-reducing it; see
// docs/parallel.md for the measured step times.
#ifndef TANDEM_PARALLEL_DETERMINISTIC_SUM_H_
#define TANDEM_PARALLEL_DETERMINISTIC_SUM_H_

#include <memory>
#include <vector>

#include "core/lane.h"
#include "core/tensor.h"
#include "parallel/comm_hook.h"
#include "parallel/work.h"

namespace tandem {

// True for 1, 2, 4, 8, ...
bool IsPowerOfTwo(int64_t n);

class DeterministicSumHook : public CommHook {
 public:
  DeterministicSumHook() = default;
  // Allocates the gathered buffers (size x each bucket); refuses a world
  // size that is not a power of two, and gradients that are not float32.
  void Bind(const std::vector<GradBucket>& buckets) override;
  // After the backward of every piece of this rank but its last (written
  // with GradMode::kOverwrite, not reduced): keeps the gradients as the next
  // leaf of the tree, adding it to the leaves before where the tree says so.
  // `lane` is where that backward left them.
  void KeepLeaf(const Lane& lane);
  // Adds the kept leaves to the last piece's gradients in tree order, then
  // all-gathers the bucket.
  std::shared_ptr<Work> Reduce(const GradBucket& bucket, const std::vector<Lane>& ready,
                               bool timed) override;
  // Sums the ranks' gathered gradients in tree order into bucket.buffer
  // (one rank: adds the kept leaves, as Reduce does with more).
  void AfterReduce(const GradBucket& bucket, Work& work,
                   const std::vector<Lane>& compute) override;
  void WaitForGradients(const GradBucket& bucket, Work& work, const Lane& lane) override;
  // Forgets this step's leaves; `lane` waits for the sums.
  void FinishStep(const Lane& lane) override;
  // Forgets the leaves kept for a step that will not reduce (skipped for a
  // non-finite loss), so the next step starts its tree afresh.
  void DropLeaves();

 private:
  void AddKeptLeaves(const GradBucket& bucket, const Lane& lane);

  std::vector<Tensor> buffers_;  // per bucket: the reducer's gradient buffer
  std::vector<Tensor> gathered_;  // per bucket: [size * elements], rank-major
  // kept_[level][bucket]: the sum of 2^level leaves, while occupied_[level].
  std::vector<std::vector<Tensor>> kept_;
  std::vector<bool> occupied_;
  int size_ = 1;
  // Declared last: destroyed first, once the work queued on it has run.
  OwnedLane lane_;  // where the sums run
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_DETERMINISTIC_SUM_H_
