// Tensor::RecordLane: memory that work on another lane uses is handed out
// again only once that work has run (Note [Stream-ordered reuse] in
// core/cuda/caching_allocator.h). A DeviceStall holds the side lane still, so
// "not yet run" lasts as long as the test wants.
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/tensor.h"
#include "tests/core/cuda/cuda_test.h"
#include "tests/support/device_stall.h"

namespace tandem {
namespace {

using ::tandem::testing::CudaTest;
using ::tandem::testing::DeviceStall;

constexpr int64_t kElements = 1 << 16;  // 256 KiB: one size class

// The CPU's lanes run work as it is called: a recorded tensor's memory goes
// back at once.
TEST(RecordLaneCpuTest, FreesAtOnceOnTheCpu) {
  Backend& cpu = GetBackend(Device::Cpu());
  const int64_t before = cpu.allocator().stats().bytes_in_use;
  {
    Tensor t = Tensor::Zeros({kElements});
    t.RecordLane(cpu.side_lane());
    EXPECT_GT(cpu.allocator().stats().bytes_in_use, before);
  }
  EXPECT_EQ(cpu.allocator().stats().bytes_in_use, before);
}

TEST(RecordLaneCpuTest, RefusesNoLane) {
  Tensor t = Tensor::Zeros({4});
  try {
    t.RecordLane(Lane());
    FAIL() << "RecordLane accepted no lane";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RecordLane: no lane"), std::string::npos) << e.what();
  }
  Tensor().RecordLane(Lane());  // an undefined tensor: nothing to mark
}

class RecordLaneTest : public CudaTest {
 protected:
  Device gpu_ = Device::Cuda(0);
  Backend& backend() { return GetBackend(gpu_); }
  // A fresh block of the test's size class, its address.
  const void* FreshBlock() {
    Tensor t = Tensor::Empty({kElements}, gpu_);
    return t.raw_data();
  }
};

// Without RecordLane a freed block is handed out again at once: the main
// lane orders its reuse.
TEST_F(RecordLaneTest, MainLaneBlockIsReusedAtOnce) {
  const void* first = FreshBlock();
  EXPECT_EQ(FreshBlock(), first);
}

TEST_F(RecordLaneTest, RecordingTheMainLaneChangesNothing) {
  const void* first = nullptr;
  {
    Tensor t = Tensor::Empty({kElements}, gpu_);
    first = t.raw_data();
    t.RecordLane(backend().main_lane().WithGemmReserve(1));  // the same queue
  }
  EXPECT_EQ(FreshBlock(), first);
}

TEST_F(RecordLaneTest, BlockWaitsForTheLaneThatUsesIt) {
  Lane side = backend().side_lane();
  DeviceStall stall(gpu_);
  const void* recorded = nullptr;
  const int64_t in_use_before = backend().allocator().stats().bytes_in_use;
  {
    Tensor t = Tensor::Empty({kElements}, gpu_);
    recorded = t.raw_data();
    stall.Hold(side);   // side's work from here on has not run
    t.RecordLane(side);
  }
  // The block is aside, and still counted as in use.
  EXPECT_GT(backend().allocator().stats().bytes_in_use, in_use_before);
  Tensor other = Tensor::Empty({kElements}, gpu_);
  EXPECT_NE(other.raw_data(), recorded) << "handed out while the side lane may still use it";
  other = Tensor();
  stall.Release();
  backend().Synchronize(side);
  // Collected at the next allocation of any size, then reused.
  EXPECT_EQ(FreshBlock(), recorded);
  EXPECT_EQ(backend().allocator().stats().bytes_in_use, in_use_before);
}

TEST_F(RecordLaneTest, RefusesALaneOfAnotherDevice) {
  Tensor t = Tensor::Zeros({4});  // on the CPU
  try {
    t.RecordLane(backend().side_lane());
    FAIL() << "a CPU tensor accepted a lane of " << gpu_.ToString();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a lane of the tensor's device cpu"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
