// BatchPrefetcher: the next batch gathered (and, on a GPU, copied to the
// device) on a background thread while the caller trains on this one.
//
// It walks a BatchIterator, takes this worker's share of each global batch
// (PrefetchOptions::shard, e.g. parallel's ShardIndices), gathers the rows
// from a Dataset and hands them out on `device`, at most one batch ahead.
// On a GPU the copy runs on a lane of its own and the caller's main lane
// waits for it with an event, so neither the host nor the main lane waits
// for a copy that is already done. See Note [Prefetch ordering].
//
//   BatchIterator batches(EpochOrder(train.size(), seed, epoch, true), 128);
//   PrefetchOptions options;
//   options.shard = [&](const std::vector<int64_t>& global) {
//     return ShardIndices(global, worker.rank, worker.size);
//   };
//   BatchPrefetcher prefetcher(train, std::move(batches), worker.device, options);
//   Batch batch;
//   while (prefetcher.Next(batch)) {   // false at the end of the epoch
//     loss.Forward(model->Forward(batch.features), batch.labels, batch.global_size);
//     ...                              // work on the device's main lane
//   }
//
// The dataset must outlive the prefetcher; Dataset::Gather runs on the
// background thread, one call at a time.
#ifndef TANDEM_DATA_PREFETCHER_H_
#define TANDEM_DATA_PREFETCHER_H_

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/device.h"
#include "core/lane.h"
#include "core/tensor.h"
#include "data/batch_iterator.h"
#include "data/dataset.h"

namespace tandem {
namespace data {

// One worker's shard of one global batch, on the worker's device.
struct Batch {
  Tensor features, labels;   // [n, F], [n] or [n, L]; valid until the next Next() call
  int64_t index = 0;         // position of the batch in its epoch (0-based)
  int64_t global_size = 0;   // examples in the whole global batch (for loss normalisation)
};

struct PrefetchOptions {
  // false: prepare each batch on the caller's thread in Next() (the same
  // results, for comparison).
  bool background = true;
  // Which of a global batch's example indices this worker takes (the
  // Trainer passes parallel's ShardIndices); empty: all of them.
  std::function<std::vector<int64_t>(const std::vector<int64_t>&)> shard;
  // The largest shard, for buffer sizes (0: the batch size). A larger shard
  // throws.
  int64_t max_rows = 0;
  // Called on the preparing thread after each batch is ready, with its
  // index and the host wall-clock span spent preparing it (gather and copy
  // queued), e.g. to draw it in a trace.
  std::function<void(int64_t index, std::chrono::steady_clock::time_point begin,
                     std::chrono::steady_clock::time_point end)>
      on_prepared;
};

class BatchPrefetcher {
 public:
  // Starts preparing the first batch at once (background) or in the first
  // Next() (otherwise). `device`: where batches are handed out.
  BatchPrefetcher(const Dataset& dataset, BatchIterator batches, Device device,
                  PrefetchOptions options = {});
  // Stops and joins the thread, also mid-epoch; never throws.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The next batch, ready for the device's main lane; false at the end of
  // the epoch. The previous batch's tensors are refilled from here on: work
  // that reads them must be queued on the main lane (or ordered before the
  // main lane's later work) before this call. Rethrows an error of the
  // preparing thread (from Gather or the copy), and again on later calls.
  bool Next(Batch& batch);

 private:
  // Two of each, used in turn: batch k in slot k % 2.
  struct Slot {
    Tensor features, labels;               // [max_rows, F], [max_rows(, L)] on device
    std::unique_ptr<LaneEvent> ready;      // GPU: recorded after the copy
    std::unique_ptr<LaneEvent> released;   // GPU: main lane done with the slot
    int64_t rows = 0, index = 0, global_size = 0;
  };

  // Fills slot k % 2 with the iterator's next batch; false at the end.
  bool Prepare(int64_t k);
  void Loop();

  const Dataset& dataset_;
  BatchIterator batches_;
  Device device_;
  PrefetchOptions options_;
  int64_t max_rows_;
  Backend* backend_ = nullptr;   // GPU only
  Lane main_;                    // GPU only
  Tensor host_features_, host_labels_;   // GPU: the gather's host rows
  std::array<Slot, 2> slots_;
  // After slots_: destroyed first, once the copies queued on it have run.
  OwnedLane copy_;

  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t consumed_ = 0;   // batches handed out; the caller's thread only
  int64_t allowed_ = 0;    // the thread may prepare batches 0..allowed_
  int64_t prepared_ = 0;   // batches 0..prepared_-1 are ready
  int64_t end_at_ = -1;    // the iterator ran out at this batch
  int64_t error_at_ = -1;  // preparing this batch threw error_
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_PREFETCHER_H_
