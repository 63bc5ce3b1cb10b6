// Per-epoch example order and mini-batches of example indices.
//
// EpochOrder depends only on (num_examples, seed, epoch), so every
// data-parallel worker computes the same permutation without talking to the
// others, and a resumed run sees the order the interrupted one saw.
// BatchIterator walks an order in batches; Seek() resumes mid-epoch at the
// "data position" a checkpoint recorded (position()).
//
//   BatchIterator batches(EpochOrder(train.size(), seed, epoch, true), 64);
//   batches.Seek(checkpoint.batch);              // 0 for a fresh epoch
//   std::vector<int64_t> indices;
//   Tensor x = Tensor::Empty({64, 784}, device);
//   Tensor y = Tensor::Empty({64}, device);
//   while (batches.Next(indices)) {
//     const int64_t n = indices.size();  // the last batch may be smaller
//     Tensor xb = x.Slice(0, n), yb = y.Slice(0, n);
//     GatherRows(train.features, indices, xb);
//     GatherRows(train.labels, indices, yb);
//   }
#ifndef TANDEM_DATA_BATCH_ITERATOR_H_
#define TANDEM_DATA_BATCH_ITERATOR_H_

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tandem {
namespace data {

// The order of examples 0..num_examples-1 in `epoch`: a permutation drawn
// from Rng(seed).Fork(epoch) when shuffle is true, 0, 1, 2, ... otherwise.
std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed,
                                int64_t epoch, bool shuffle);

class BatchIterator {
 public:
  // Batches of batch_size consecutive entries of `order`. The last batch
  // may be smaller; drop_last drops it instead.
  BatchIterator(std::vector<int64_t> order, int64_t batch_size,
                bool drop_last = false);

  int64_t num_batches() const { return num_batches_; }
  int64_t batch_size() const { return batch_size_; }
  // The index of the batch Next() returns next; num_batches() at the end.
  int64_t position() const { return position_; }
  bool done() const { return position_ == num_batches_; }
  const std::vector<int64_t>& order() const { return order_; }

  // Continues from batch `batch_index` (0..num_batches()), e.g. a
  // checkpoint's position().
  void Seek(int64_t batch_index);
  // Fills `batch` with the next batch's example indices and advances;
  // returns false (leaving `batch` empty) when the epoch is done.
  bool Next(std::vector<int64_t>& batch);

 private:
  std::vector<int64_t> order_;
  int64_t batch_size_;
  int64_t num_batches_;
  int64_t position_ = 0;
};

// out[i] = source[indices[i]] for the rows of a CPU source: [N, F] into
// [indices.size(), F], or [N] into [indices.size()] (labels). `out` may be
// on any device; a device output is gathered on the host and copied once.
void GatherRows(const Tensor& source, const std::vector<int64_t>& indices,
                Tensor& out);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_BATCH_ITERATOR_H_
