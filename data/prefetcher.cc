#include "data/prefetcher.h"

#include <utility>

#include "core/backend_registry.h"
#include "core/check.h"

namespace tandem {
namespace data {

// Note [Prefetch ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Batch k lives in slot k % 2; the preparing thread fills batch k + 1 while
// the caller works on batch k, never further ahead. Counters under mutex_
// say who may touch a slot: Next() for batch k first sets allowed_ = k + 1
// (the caller is done with batch k - 1, whose slot batch k + 1 reuses), then
// waits for prepared_ > k. The thread prepares batch j only once
// allowed_ >= j, so the host never writes a slot the caller still holds.
//
// On a GPU the device's queues need the same two orders, without the host
// waiting for either:
//   1. The main lane reads batch k only after its copy: the thread records
//      slot.ready on the copy lane after queueing the copy; Next() makes
//      the main lane wait for that event (not for the whole copy lane, which
//      may already be copying batch k + 1).
//   2. The copy lane overwrites a slot only after the main-lane work that
//      read it: Next() for batch k records slot (k - 1) % 2's `released` on
//      the main lane (everything queued so far, which includes all the work
//      on batch k - 1), and the thread makes the copy lane wait for it before
//      copying batch k + 1 into that slot.
// Rows are gathered on the host into host_features_/host_labels_ and copied
// with Backend::CopyHostToDevice, which stages them through pinned memory
// and returns once the host rows may be reused (Note [Pinned staging]), so
// one host buffer serves both slots. The constructor orders the copy lane
// after the main lane's work so far (the slots' memory may have been freed
// there, Note [Stream-ordered reuse]); the destructor orders the main lane
// after the copy lane before the slots are freed.
//
// On the CPU every lane is the calling thread, so the counters alone order
// everything: the thread gathers straight into the slot, with no copy.

BatchPrefetcher::BatchPrefetcher(const Dataset& dataset, BatchIterator batches,
                                 Device device, PrefetchOptions options)
    : dataset_(dataset),
      batches_(std::move(batches)),
      device_(device),
      options_(std::move(options)),
      max_rows_(options_.max_rows > 0 ? options_.max_rows : batches_.batch_size()) {
  const int64_t width = dataset_.feature_size();
  TANDEM_CHECK(width > 0) << "BatchPrefetcher: dataset " << dataset_.name()
                          << " has feature_size " << width << ", expected at least 1";
  for (Slot& slot : slots_) {
    slot.features = Tensor::Empty({max_rows_, width}, device_);
    slot.labels = Tensor::Empty(LabelShape(dataset_, max_rows_), device_);
  }
  if (device_.is_cuda()) {
    backend_ = &GetBackend(device_);
    main_ = backend_->main_lane();
    LaneOptions lane;
    lane.name = "prefetch";
    copy_ = backend_->NewLane(lane);
    backend_->WaitFor(copy_.get(), main_);  // See Note [Prefetch ordering].
    host_features_ = Tensor::Empty({max_rows_, width});
    host_labels_ = Tensor::Empty(LabelShape(dataset_, max_rows_));
    for (Slot& slot : slots_) {
      slot.ready = backend_->NewEvent(/*timing=*/false);
      slot.released = backend_->NewEvent(/*timing=*/false);
    }
  }
  if (options_.background) thread_ = std::thread([this] { Loop(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (backend_ != nullptr) {
    // The slots are freed in the main lane's order: see Note [Prefetch
    // ordering]. A destructor must not throw; the error is dropped.
    try {
      backend_->WaitFor(main_, copy_.get());
    } catch (...) {
    }
  }
}

bool BatchPrefetcher::Prepare(int64_t k) {
  const int64_t index = batches_.position();
  std::vector<int64_t> global;
  if (!batches_.Next(global)) return false;
  const auto begin = std::chrono::steady_clock::now();
  const std::vector<int64_t> mine = options_.shard ? options_.shard(global) : global;
  const int64_t n = static_cast<int64_t>(mine.size());
  TANDEM_CHECK(n <= max_rows_)
      << "BatchPrefetcher (" << dataset_.name() << "): batch " << index << " gives this worker "
      << n << " examples but the buffers hold " << max_rows_
      << "; set PrefetchOptions::max_rows to the largest shard";
  Slot& slot = slots_[k % 2];
  if (backend_ == nullptr) {
    dataset_.Gather(mine, slot.features, slot.labels);
  } else {
    dataset_.Gather(mine, host_features_, host_labels_);
    // Before the copy lane overwrites the slot: see Note [Prefetch ordering].
    if (k >= 2) backend_->Wait(copy_.get(), *slot.released);
    slot.features.Slice(0, n).CopyFrom(host_features_.Slice(0, n), copy_.get());
    slot.labels.Slice(0, n).CopyFrom(host_labels_.Slice(0, n), copy_.get());
    backend_->Record(*slot.ready, copy_.get());
  }
  slot.rows = n;
  slot.index = index;
  slot.global_size = static_cast<int64_t>(global.size());
  if (options_.on_prepared) {
    options_.on_prepared(index, begin, std::chrono::steady_clock::now());
  }
  return true;
}

void BatchPrefetcher::Loop() {
  for (int64_t k = 0;; ++k) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || allowed_ >= k; });
      if (stop_) return;
    }
    bool more = false;
    std::exception_ptr error;
    try {
      more = Prepare(k);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) {
        error_ = error;
        error_at_ = k;
      } else if (!more) {
        end_at_ = k;
      } else {
        prepared_ = k + 1;
      }
    }
    changed_.notify_all();
    if (error || !more) return;
  }
}

bool BatchPrefetcher::Next(Batch& batch) {
  const int64_t k = consumed_;
  // The caller is done with batch k - 1: its slot may be refilled (with
  // batch k + 1) after the main lane's work so far.
  if (backend_ != nullptr && k >= 1) {
    backend_->Record(*slots_[(k - 1) % 2].released, main_);
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    allowed_ = k + 1;
    if (!options_.background && prepared_ <= k && end_at_ < 0 && error_at_ < 0) {
      // Prepared here, on the caller's thread, exactly as Loop() would.
      lock.unlock();
      bool more = false;
      try {
        more = Prepare(k);
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        error_at_ = k;
        throw;
      }
      lock.lock();
      if (more) prepared_ = k + 1;
      else end_at_ = k;
    } else {
      changed_.notify_all();
      changed_.wait(lock, [&] {
        return prepared_ > k || (end_at_ >= 0 && end_at_ <= k) ||
               (error_at_ >= 0 && error_at_ <= k);
      });
    }
    if (error_at_ >= 0 && error_at_ <= k) std::rethrow_exception(error_);
    if (end_at_ >= 0 && end_at_ <= k) return false;
  }
  Slot& slot = slots_[k % 2];
  if (backend_ != nullptr) backend_->Wait(main_, *slot.ready);
  batch.features = slot.features.Slice(0, slot.rows);
  batch.labels = slot.labels.Slice(0, slot.rows);
  batch.index = slot.index;
  batch.global_size = slot.global_size;
  ++consumed_;
  return true;
}

}  // namespace data
}  // namespace tandem
