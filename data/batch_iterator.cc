#include "data/batch_iterator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/rng.h"

namespace tandem {
namespace data {

std::vector<int64_t> EpochOrder(int64_t num_examples, uint64_t seed,
                                int64_t epoch, bool shuffle) {
  TANDEM_CHECK(num_examples >= 0)
      << "EpochOrder: num_examples is " << num_examples << ", expected >= 0";
  TANDEM_CHECK(epoch >= 0) << "EpochOrder: epoch is " << epoch
                           << ", expected >= 0";
  std::vector<int64_t> order(num_examples);
  std::iota(order.begin(), order.end(), int64_t{0});
  // A fork per epoch (rather than one generator advanced epoch by epoch)
  // lets a run resumed at epoch k draw epoch k's order directly.
  if (shuffle) Rng(seed).Fork(static_cast<uint64_t>(epoch)).Shuffle(order);
  return order;
}

BatchIterator::BatchIterator(std::vector<int64_t> order, int64_t batch_size,
                             bool drop_last)
    : order_(std::move(order)), batch_size_(batch_size) {
  TANDEM_CHECK(batch_size > 0)
      << "BatchIterator: batch_size is " << batch_size << ", expected >= 1";
  const int64_t n = static_cast<int64_t>(order_.size());
  num_batches_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

void BatchIterator::Seek(int64_t batch_index) {
  TANDEM_CHECK(batch_index >= 0 && batch_index <= num_batches_)
      << "BatchIterator: cannot resume at batch " << batch_index
      << ": the epoch has " << num_batches_ << " batches of " << batch_size_
      << " (" << order_.size() << " examples)";
  position_ = batch_index;
}

bool BatchIterator::Next(std::vector<int64_t>& batch) {
  batch.clear();
  if (done()) return false;
  const int64_t begin = position_ * batch_size_;
  const int64_t end =
      std::min(begin + batch_size_, static_cast<int64_t>(order_.size()));
  batch.assign(order_.begin() + begin, order_.begin() + end);
  ++position_;
  return true;
}

void GatherRows(const Tensor& source, const std::vector<int64_t>& indices,
                Tensor& out) {
  TANDEM_CHECK(source.defined() && out.defined())
      << "GatherRows: source and out must be defined";
  TANDEM_CHECK(source.device().is_cpu())
      << "GatherRows: source is on " << source.device()
      << ", expected cpu (datasets live on the host)";
  TANDEM_CHECK(source.rank() == 1 || source.rank() == 2)
      << "GatherRows: source is " << ShapeToString(source.shape())
      << ", expected [N, F] or [N]";
  Shape expected = source.shape();
  expected[0] = static_cast<int64_t>(indices.size());
  TANDEM_CHECK(out.shape() == expected)
      << "GatherRows: out is " << ShapeToString(out.shape()) << " but "
      << indices.size() << " rows of " << ShapeToString(source.shape())
      << " make " << ShapeToString(expected);
  const int64_t rows = source.dim(0);
  const int64_t width = source.rank() == 2 ? source.dim(1) : 1;

  // A device output is filled from a host staging tensor in one copy rather
  // than one small copy per row.
  Tensor staging = out.device().is_cpu() ? out : Tensor::Empty(out.shape());
  const float* from = source.data();
  float* to = staging.data();
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t row = indices[i];
    TANDEM_CHECK(row >= 0 && row < rows)
        << "GatherRows: indices[" << i << "] is " << row << ", expected 0 to "
        << rows - 1;
    std::memcpy(to + i * width, from + row * width, width * sizeof(float));
  }
  if (!out.device().is_cpu()) out.CopyFrom(staging);
}

}  // namespace data
}  // namespace tandem
