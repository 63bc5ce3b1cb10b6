// Tests data/prefetcher.h: the batches it hands out equal gathering by hand
// (data::GatherRows), bit for bit, with the background thread on or off, on
// the CPU and (where there is one) a GPU; shards, the last smaller batch,
// resuming mid-epoch, stopping early, and errors of the preparing thread.
#include "data/prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace data {
namespace {

using ::tandem::testing::ErrorText;
using Indices = std::vector<int64_t>;
constexpr int64_t kExamples = 37, kFeatures = 5, kBatch = 8;

// x[i, j] = i + j / 8 + 1/3 (not round numbers, so bits matter); y[i] = i % 7.
TensorDataset Numbers(int64_t n = kExamples) {
  std::vector<float> x(n * kFeatures), y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < kFeatures; ++j) x[i * kFeatures + j] = i + j / 8.f + 1 / 3.f;
    y[i] = static_cast<float>(i % 7);
  }
  return TensorDataset(Tensor::FromVector(x, {n, kFeatures}), Tensor::FromVector(y, {n}), 7,
                       "numbers");
}

// What one Next() handed out, copied to the host.
struct Seen {
  std::vector<float> features, labels;
  int64_t index, global_size;
  bool operator==(const Seen& o) const {
    return features == o.features && labels == o.labels && index == o.index &&
           global_size == o.global_size;
  }
};

std::vector<Seen> Drain(BatchPrefetcher& prefetcher) {
  std::vector<Seen> seen;
  Batch batch;
  while (prefetcher.Next(batch)) {
    seen.push_back({batch.features.ToVector(), batch.labels.ToVector(), batch.index,
                    batch.global_size});
  }
  EXPECT_FALSE(prefetcher.Next(batch)) << "Next after the end must stay false";
  return seen;
}

// The same batches gathered by hand with GatherRows, on the host.
std::vector<Seen> ByHand(const TensorDataset& d, BatchIterator batches,
                         const PrefetchOptions& options = {}) {
  std::vector<Seen> seen;
  Indices global;
  for (int64_t index = batches.position(); batches.Next(global); ++index) {
    const Indices mine = options.shard ? options.shard(global) : global;
    const int64_t n = static_cast<int64_t>(mine.size());
    Tensor x = Tensor::Empty({n, d.feature_size()}), y = Tensor::Empty({n});
    GatherRows(d.features, mine, x);
    GatherRows(d.labels, mine, y);
    seen.push_back({x.ToVector(), y.ToVector(), index, static_cast<int64_t>(global.size())});
  }
  return seen;
}

BatchIterator Shuffled() { return BatchIterator(EpochOrder(kExamples, 5, 1, true), kBatch); }

class PrefetcherTest : public ::tandem::testing::DeviceTest {};

TEST_P(PrefetcherTest, EqualsGatherRowsWithAndWithoutThread) {
  const TensorDataset d = Numbers();
  const std::vector<Seen> expected = ByHand(d, Shuffled());
  ASSERT_EQ(expected.size(), 5u);
  ASSERT_EQ(expected.back().labels.size(), 5u);  // 37 = 4 * 8 + 5
  for (bool background : {true, false}) {
    PrefetchOptions options;
    options.background = background;
    BatchPrefetcher prefetcher(d, Shuffled(), device(), options);
    const std::vector<Seen> seen = Drain(prefetcher);
    EXPECT_TRUE(seen == expected) << "background = " << background;
  }
}

TEST_P(PrefetcherTest, ShardOfEachGlobalBatch) {
  const TensorDataset d = Numbers();
  PrefetchOptions options;
  options.shard = [](const Indices& global) {  // rank 1 of 2: odd positions
    Indices mine;
    for (size_t i = 1; i < global.size(); i += 2) mine.push_back(global[i]);
    return mine;
  };
  options.max_rows = kBatch / 2;
  BatchPrefetcher prefetcher(d, Shuffled(), device(), options);
  const std::vector<Seen> seen = Drain(prefetcher);
  EXPECT_TRUE(seen == ByHand(d, Shuffled(), options));
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0].labels.size(), 4u);
  EXPECT_EQ(seen[0].global_size, kBatch);
  EXPECT_EQ(seen[4].labels.size(), 2u);  // odd positions of the last 5
  EXPECT_EQ(seen[4].global_size, 5);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(PrefetcherTest);

TEST(PrefetcherCpuTest, ResumesAtASeekedBatch) {
  const TensorDataset d = Numbers();
  BatchIterator batches = Shuffled();
  batches.Seek(3);
  BatchPrefetcher prefetcher(d, batches, Device::Cpu());
  const std::vector<Seen> seen = Drain(prefetcher);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].index, 3);
  EXPECT_TRUE(seen == ByHand(d, batches));
}

TEST(PrefetcherCpuTest, DropLastAndEmptyEpoch) {
  const TensorDataset d = Numbers();
  BatchPrefetcher dropped(d, BatchIterator(EpochOrder(kExamples, 5, 0, false), kBatch, true),
                          Device::Cpu());
  EXPECT_EQ(Drain(dropped).size(), 4u);
  BatchIterator done = Shuffled();
  done.Seek(done.num_batches());
  BatchPrefetcher empty(d, done, Device::Cpu());
  EXPECT_TRUE(Drain(empty).empty());
}

TEST(PrefetcherCpuTest, ShardLargerThanMaxRowsThrows) {
  const TensorDataset d = Numbers();
  PrefetchOptions options;
  options.max_rows = 3;
  BatchPrefetcher prefetcher(d, Shuffled(), Device::Cpu(), options);
  Batch batch;
  const std::string text = ErrorText([&] { prefetcher.Next(batch); });
  EXPECT_NE(text.find("gives this worker 8 examples but the buffers hold 3"), std::string::npos)
      << text;
}

// A dataset whose Gather takes a while and is counted, and that claims more
// examples than it has, so indices past `real` fail in Gather.
class SlowDataset final : public Dataset {
 public:
  SlowDataset(int64_t claimed, int64_t real, std::chrono::milliseconds delay)
      : inner_(Numbers(real)), claimed_(claimed), delay_(delay) {}
  int64_t size() const override { return claimed_; }
  int64_t feature_size() const override { return inner_.feature_size(); }
  int64_t num_classes() const override { return inner_.num_classes(); }
  std::string name() const override { return "slow"; }
  void Gather(const Indices& indices, Tensor& x, Tensor& y) const override {
    ++gathers;
    std::this_thread::sleep_for(delay_);
    inner_.Gather(indices, x, y);
  }
  mutable std::atomic<int> gathers{0};

 private:
  TensorDataset inner_;
  int64_t claimed_;
  std::chrono::milliseconds delay_;
};

TEST(PrefetcherCpuTest, ErrorOfThePreparingThreadSurfacesFromNext) {
  for (bool background : {true, false}) {
    // Batches 0 and 1 are rows 0..9; batch 2 asks for row 10 of 10.
    SlowDataset d(20, 10, std::chrono::milliseconds(0));
    PrefetchOptions options;
    options.background = background;
    BatchPrefetcher prefetcher(d, BatchIterator(EpochOrder(20, 0, 0, false), 5), Device::Cpu(),
                               options);
    Batch batch;
    ASSERT_TRUE(prefetcher.Next(batch));
    ASSERT_TRUE(prefetcher.Next(batch));
    const std::string text = ErrorText([&] { prefetcher.Next(batch); });
    EXPECT_NE(text.find("indices[0] is 10"), std::string::npos) << background << ": " << text;
    EXPECT_NE(ErrorText([&] { prefetcher.Next(batch); }).find("indices[0] is 10"),
              std::string::npos)
        << "a later Next must throw again";
  }
}

TEST(PrefetcherCpuTest, AtMostOneBatchAheadAndStopsPromptly) {
  SlowDataset d(400, 400, std::chrono::milliseconds(20));
  auto start = std::chrono::steady_clock::now();
  {
    BatchPrefetcher prefetcher(d, BatchIterator(EpochOrder(400, 0, 0, true), 4), Device::Cpu());
    Batch batch;
    ASSERT_TRUE(prefetcher.Next(batch));
    // Batch 1 is prepared while the caller holds batch 0; batch 2 is not.
    for (int i = 0; i < 500 && d.gathers.load() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(d.gathers.load(), 2);
    ASSERT_TRUE(prefetcher.Next(batch));
    EXPECT_EQ(batch.index, 1);
    start = std::chrono::steady_clock::now();
  }  // 98 batches left: the destructor must not prepare them
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  EXPECT_LT(stop_ms, 1000) << "destruction mid-epoch took " << stop_ms << " ms";
  EXPECT_LE(d.gathers.load(), 3);
  // Destroyed before the first Next.
  BatchPrefetcher unused(d, BatchIterator(EpochOrder(400, 0, 0, true), 4), Device::Cpu());
}

TEST(PrefetcherCpuTest, OnPreparedRunsOnThePreparingThread) {
  const TensorDataset d = Numbers();
  for (bool background : {true, false}) {
    std::vector<int64_t> indices;
    std::vector<std::thread::id> threads;
    PrefetchOptions options;
    options.background = background;
    options.on_prepared = [&](int64_t index, std::chrono::steady_clock::time_point begin,
                              std::chrono::steady_clock::time_point end) {
      EXPECT_LE(begin, end);
      indices.push_back(index);
      threads.push_back(std::this_thread::get_id());
    };
    {
      BatchPrefetcher prefetcher(d, Shuffled(), Device::Cpu(), options);
      Drain(prefetcher);
    }
    EXPECT_EQ(indices, (Indices{0, 1, 2, 3, 4}));
    for (const std::thread::id& id : threads) {
      EXPECT_EQ(id == std::this_thread::get_id(), !background);
    }
  }
}

}  // namespace
}  // namespace data
}  // namespace tandem
