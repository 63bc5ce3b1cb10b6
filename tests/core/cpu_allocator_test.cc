// CpuAllocator: large blocks are kept for reuse (Note [Host blocks kept for
// reuse] in core/cpu/cpu_allocator.h), small ones and those past the cap go
// back to the C library, and the stats say which.
#include "core/cpu/cpu_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace tandem {
namespace cpu {
namespace {

constexpr size_t kLarge = 1 << 20;
// A cap that keeps what these tests free, under AddressSanitizer too (whose
// builds keep nothing by default).
constexpr size_t kCap = 64 << 20;

TEST(CpuAllocatorTest, BlocksAreCacheLineAligned) {
  CpuAllocator allocator;
  for (size_t bytes : {size_t{1}, size_t{100}, kLarge + 3}) {
    void* p = allocator.Allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    std::memset(p, 1, bytes);
    allocator.Free(p, bytes);
  }
  EXPECT_EQ(allocator.Allocate(0), nullptr);
}

TEST(CpuAllocatorTest, AFreedLargeBlockServesTheNextRequestOfItsSize) {
  CpuAllocator allocator(kCap);
  void* p = allocator.Allocate(kLarge);
  allocator.Free(p, kLarge);
  MemoryStats s = allocator.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_reserved, static_cast<int64_t>(kLarge));  // kept, not returned
  EXPECT_EQ(s.system_allocations, 1);
  void* q = allocator.Allocate(kLarge - 100);  // rounds to a size the kept block covers
  EXPECT_EQ(q, p);
  EXPECT_EQ(allocator.stats().system_allocations, 1);
  EXPECT_EQ(allocator.stats().bytes_in_use, static_cast<int64_t>(kLarge - 100));
  allocator.Free(q, kLarge - 100);
}

TEST(CpuAllocatorTest, AKeptBlockMuchLargerThanTheRequestIsNotUsed) {
  CpuAllocator allocator(kCap);
  void* big = allocator.Allocate(2 * kLarge);
  allocator.Free(big, 2 * kLarge);
  void* small = allocator.Allocate(kLarge);  // half the kept block: too wasteful
  EXPECT_NE(small, big);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
  EXPECT_EQ(allocator.stats().bytes_reserved, static_cast<int64_t>(3 * kLarge));
  allocator.Free(small, kLarge);
}

TEST(CpuAllocatorTest, SmallBlocksGoBackToTheCLibrary) {
  CpuAllocator allocator(kCap);
  const size_t small = CpuAllocator::kMinKeptBytes / 2;
  void* p = allocator.Allocate(small);
  allocator.Free(p, small);
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);
  void* q = allocator.Allocate(small);
  EXPECT_EQ(allocator.stats().system_allocations, 2);
  allocator.Free(q, small);
}

TEST(CpuAllocatorTest, PastTheCapFreedBlocksGoBackToTheSystem) {
  CpuAllocator allocator(/*max_kept_bytes=*/kLarge);
  void* a = allocator.Allocate(kLarge);
  void* b = allocator.Allocate(kLarge);
  allocator.Free(a, kLarge);  // kept: the cap's worth
  allocator.Free(b, kLarge);  // past the cap
  EXPECT_EQ(allocator.stats().bytes_reserved, static_cast<int64_t>(kLarge));
  allocator.ReleaseKept();
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);
  void* c = allocator.Allocate(kLarge);
  EXPECT_EQ(allocator.stats().system_allocations, 3);
  allocator.Free(c, kLarge);
}

TEST(CpuAllocatorTest, TheDefaultKeepsBlocksExceptUnderAddressSanitizer) {
  CpuAllocator allocator;
  allocator.Free(allocator.Allocate(kLarge), kLarge);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);
#else
  EXPECT_EQ(allocator.stats().bytes_reserved, static_cast<int64_t>(kLarge));
#endif
}

TEST(CpuAllocatorTest, PeakCountsWhatCallersHold) {
  CpuAllocator allocator;
  void* a = allocator.Allocate(kLarge);
  void* b = allocator.Allocate(100);
  allocator.Free(a, kLarge);
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, static_cast<int64_t>(kLarge + 100));
  allocator.ResetPeak();
  EXPECT_EQ(allocator.stats().peak_bytes_in_use, 100);
  allocator.Free(b, 100);
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
