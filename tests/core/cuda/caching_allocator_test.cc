#include "core/cuda/caching_allocator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "tests/core/cuda/cuda_test.h"

namespace tandem {
namespace cuda {
namespace {

using ::tandem::testing::CudaTest;

// Size classes need no GPU.
TEST(CachingAllocatorRoundSizeTest, SmallSizesRoundTo512) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1000), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1 << 20), size_t{1} << 20);
}

TEST(CachingAllocatorRoundSizeTest, LargeSizesUseQuarterPowerOfTwoSteps) {
  const size_t mib = size_t{1} << 20;
  EXPECT_EQ(CachingAllocator::RoundSize(mib + 1), mib + mib / 4);
  EXPECT_EQ(CachingAllocator::RoundSize(2 * mib), 2 * mib);
  EXPECT_EQ(CachingAllocator::RoundSize(2 * mib + 1), 2 * mib + mib / 2);
  EXPECT_EQ(CachingAllocator::RoundSize(7 * mib), 7 * mib);
  EXPECT_EQ(CachingAllocator::RoundSize(100 * mib), 112 * mib);
}

TEST(CachingAllocatorRoundSizeTest, AtMostQuarterSlackAndMonotone) {
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 34); bytes = bytes * 3 / 2 + 7) {
    const size_t size = CachingAllocator::RoundSize(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_GE(size, previous);
    EXPECT_EQ(size % 512, 0u) << bytes;
    if (bytes > (size_t{1} << 20)) {
      EXPECT_LE(size - bytes, bytes / 4) << bytes;
    }
    previous = size;
  }
}

class CachingAllocatorTest : public CudaTest {};

TEST_F(CachingAllocatorTest, ZeroBytesIsNull) {
  CachingAllocator allocator(0);
  EXPECT_EQ(allocator.Allocate(0), nullptr);
  allocator.Free(nullptr, 0);
  EXPECT_EQ(allocator.stats().system_allocations, 0);
}

TEST_F(CachingAllocatorTest, ReusesFreedBlockWithoutCudaMalloc) {
  CachingAllocator allocator(0);
  void* p = allocator.Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(allocator.stats().system_allocations, 1);
  allocator.Free(p, 1000);
  void* q = allocator.Allocate(1000);
  EXPECT_EQ(q, p);
  EXPECT_EQ(allocator.stats().system_allocations, 1);
  // Another request in the same size class takes the same block too.
  allocator.Free(q, 1000);
  void* r = allocator.Allocate(1024);
  EXPECT_EQ(r, p);
  EXPECT_EQ(allocator.stats().system_allocations, 1);
  allocator.Free(r, 1024);
}

// Spares for graph capture: every class seen gets at least that many free
// blocks, so that many more requests of it need no cudaMalloc.
TEST_F(CachingAllocatorTest, ReserveSparesCachesBlocksOfEveryClassSeen) {
  CachingAllocator allocator(0);
  void* held = allocator.Allocate(100);        // class 512, still in use
  allocator.Free(allocator.Allocate(3 << 20), 3 << 20);  // a large class, cached
  const int64_t before = allocator.stats().system_allocations;
  allocator.ReserveSpares(2);
  // Class 512: 0 free -> 2 new; the large class: 1 free -> 1 new.
  EXPECT_EQ(allocator.stats().system_allocations, before + 3);
  allocator.ReserveSpares(2);  // already there: nothing new
  EXPECT_EQ(allocator.stats().system_allocations, before + 3);
  void* a = allocator.Allocate(200);
  void* b = allocator.Allocate(300);
  void* c = allocator.Allocate(3 << 20);
  void* d = allocator.Allocate(3 << 20);
  EXPECT_EQ(allocator.stats().system_allocations, before + 3);
  for (void* p : {a, b, held}) allocator.Free(p, 100);
  for (void* p : {c, d}) allocator.Free(p, 3 << 20);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
}

TEST_F(CachingAllocatorTest, Stats) {
  CachingAllocator allocator(0);
  void* a = allocator.Allocate(1000);  // class 1024
  void* b = allocator.Allocate(5000);  // class 5120
  MemoryStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 1024 + 5120);
  EXPECT_EQ(s.peak_bytes_in_use, 1024 + 5120);
  EXPECT_EQ(s.bytes_reserved, 1024 + 5120);
  EXPECT_EQ(s.system_allocations, 2);

  allocator.Free(b, 5000);
  s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 1024);
  EXPECT_EQ(s.peak_bytes_in_use, 1024 + 5120);
  EXPECT_EQ(s.bytes_reserved, 1024 + 5120);  // cached, not returned

  allocator.Free(a, 1000);
  allocator.EmptyCache();
  s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_reserved, 0);
  EXPECT_EQ(s.system_allocations, 2);
}

TEST_F(CachingAllocatorTest, ManySizesSteadyState) {
  CachingAllocator allocator(0);
  const std::vector<size_t> sizes = {1,
                                     4,
                                     511,
                                     512,
                                     513,
                                     4096,
                                     100000,
                                     1 << 20,
                                     (1 << 20) + 1,
                                     3 << 20,
                                     (5 << 20) + 17,
                                     64 << 20,
                                     4,
                                     4096,
                                     100000};
  int64_t after_first = 0;
  int64_t reserved_after_first = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<void*> blocks;
    std::set<void*> distinct;
    for (size_t bytes : sizes) {
      void* p = allocator.Allocate(bytes);
      ASSERT_NE(p, nullptr);
      // The block is really there and really this big.
      CUDA_CHECK(cudaMemset(p, step, bytes));
      blocks.push_back(p);
      distinct.insert(p);
    }
    EXPECT_EQ(distinct.size(), sizes.size()) << "a block was handed out twice";
    for (size_t i = 0; i < sizes.size(); ++i)
      allocator.Free(blocks[i], sizes[i]);
    EXPECT_EQ(allocator.stats().bytes_in_use, 0);
    if (step == 0) {
      after_first = allocator.stats().system_allocations;
      reserved_after_first = allocator.stats().bytes_reserved;
    } else {
      EXPECT_EQ(allocator.stats().system_allocations, after_first)
          << "step " << step << " called cudaMalloc";
      EXPECT_EQ(allocator.stats().bytes_reserved, reserved_after_first);
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_F(CachingAllocatorTest, ThreadSafe) {
  CachingAllocator allocator(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 200; ++i) {
        const size_t bytes = 512 * static_cast<size_t>(1 + (i + t) % 7);
        void* p = allocator.Allocate(bytes);
        allocator.Free(p, bytes);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const MemoryStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  // At most one block per class per thread was ever needed at once.
  EXPECT_LE(s.system_allocations, 4 * 7);
}

TEST_F(CachingAllocatorTest, OutOfMemoryThrowsWithSizeAndStats) {
  CachingAllocator allocator(0);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t too_much = total_bytes * 2;
  try {
    allocator.Allocate(too_much);
    FAIL() << "allocating " << too_much << " bytes succeeded";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find(std::to_string(too_much)), std::string::npos) << text;
    EXPECT_NE(text.find("reserved"), std::string::npos) << text;
  }
  // The failure did not poison later CUDA calls.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* p = allocator.Allocate(1000);
  EXPECT_NE(p, nullptr);
  allocator.Free(p, 1000);
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
