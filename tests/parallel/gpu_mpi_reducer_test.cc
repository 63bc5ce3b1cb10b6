// Data parallelism on GPUs in MPI mode: each rank drives one GPU through
// NCCL; 2 ranks equal one GPU on the global batch, and every rank ends with
// bitwise the same parameters, and a step never makes the host wait for the
// GPU. Run under mpirun -np 2 by mpi_test.sh.
#include <gtest/gtest.h>

#include "core/backend_registry.h"
#include "parallel/launcher.h"
#include "parallel/mpi_communicator.h"
#include "parallel/thread_communicator.h"
#include "tests/support/dp_training.h"
#include "tests/support/host_waits.h"

namespace tandem {
namespace {

TEST(GpuMpiReducerTest, RanksEqualOneGpuOnTheGlobalBatch) {
  MpiCommunicator world;
  if (CudaDeviceCount() < world.size()) {
    GTEST_SKIP() << "needs " << world.size() << " GPUs, found " << CudaDeviceCount()
                 << ": " << CudaUnavailableReason();
  }
  testing::DpSetup setup;
  setup.steps = 5;
  // The reference: this rank alone, on its own GPU, with the global batch.
  setup.device = Device::Cuda(world.local_rank() % CudaDeviceCount());
  ThreadGroup alone(1);
  const std::vector<float> reference = testing::TrainDataParallel(alone.communicator(0), setup);

  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  options.device = "cuda";
  std::vector<float> params;
  Launch(options, [&](Worker& w) {
    testing::DpSetup mine = setup;
    mine.device = w.device;
    params = testing::TrainDataParallel(w.gradient_comm(), mine);
  });
  const double diff = testing::MaxRelativeDifference(params, reference);
  std::cout << "rank " << world.rank() << ": 2 GPUs (MPI) vs 1 GPU, max relative difference "
            << diff << "\n";
  EXPECT_LE(diff, 1e-5);
  std::vector<float> root = params;
  world.Broadcast(root.data(), static_cast<int64_t>(root.size()), 0)->Wait();
  EXPECT_EQ(root, params) << "rank " << world.rank() << " differs from rank 0";
}

// One process per GPU, so unlike the threads-mode copy of this test
// (gpu_reducer_test) it also runs under compute-sanitizer.
TEST(GpuMpiReducerTest, StepNeverWaitsOnTheHost) {
  MpiCommunicator world;
  if (CudaDeviceCount() < world.size()) {
    GTEST_SKIP() << "needs " << world.size() << " GPUs, found " << CudaDeviceCount()
                 << ": " << CudaUnavailableReason();
  }
  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  options.device = "cuda";
  int64_t waits = -1;
  Launch(options, [&](Worker& w) {
    waits = testing::HostWaitsDuringSteps(w.device, w.rank, w.gradient_comm(), w.comm, 5);
  });
  std::cout << "rank " << world.rank() << ": host waits during 5 steps: " << waits << "\n";
  EXPECT_EQ(waits, 0);
}

// Runs on every machine: with a GPU per rank, each rank gets its node-local
// GPU and an NCCL communicator; without, --device=cuda fails on every rank
// with a clear message (no GPUs at all, or fewer than the ranks).
TEST(GpuMpiReducerTest, RanksGetTheirGpuOrAClearError) {
  MpiCommunicator world;
  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  options.device = "cuda";
  if (CudaDeviceCount() < world.size()) {
    const char* expected = CudaDeviceCount() == 0
                               ? "--device=cuda but there are no CUDA devices"
                               : "--mode=mpi --device=cuda puts each rank on a GPU of its own";
    try {
      Launch(options, [](Worker&) {});
      FAIL() << "no error with " << CudaDeviceCount() << " GPU(s) for " << world.size()
             << " ranks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    return;
  }
  Launch(options, [&](Worker& w) {
    EXPECT_EQ(w.device, Device::Cuda(world.local_rank()));
    ASSERT_NE(w.device_comm, nullptr);
    EXPECT_EQ(w.device_comm->size(), world.size());
  });
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
