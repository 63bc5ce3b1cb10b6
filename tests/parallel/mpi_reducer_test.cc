// The reducer across MPI ranks equals one worker on the global batch; with
// bfloat16 compression, ranks stay identical.
// Run by mpi_test.sh under mpirun -np 2 and -np 4.
#include <gtest/gtest.h>

#include "parallel/mpi_communicator.h"
#include "parallel/thread_communicator.h"
#include "tests/support/dp_training.h"

namespace tandem {
namespace {

using testing::DpSetup;

TEST(MpiReducerTest, RanksEqualOneWorkerOnTheGlobalBatch) {
  MpiCommunicator comm;
  for (bool overlap : {true, false}) {
    DpSetup setup;
    setup.overlap = overlap;
    ThreadGroup alone(1);  // the reference: this process on its own
    const std::vector<float> reference =
        testing::TrainDataParallel(alone.communicator(0), setup);
    const std::vector<float> params = testing::TrainDataParallel(comm, setup);
    const double diff = testing::MaxRelativeDifference(params, reference);
    std::cout << "rank " << comm.rank() << "/" << comm.size()
              << (overlap ? " overlap" : " no-overlap")
              << ": max relative difference to 1 worker " << diff << "\n";
    EXPECT_LE(diff, 1e-5);
    // Every rank holds rank 0's parameters, bitwise.
    std::vector<float> root = params;
    comm.Broadcast(root.data(), static_cast<int64_t>(root.size()), 0)->Wait();
    EXPECT_EQ(root, params);
  }
}

// Gradients all-reduced as bfloat16 (BFloat16CompressionHook over MPI):
// every rank ends with rank 0's parameters bitwise, compression changes the
// result, and inside the per-bucket update hook it gives what Step gives.
TEST(MpiReducerTest, BFloat16CompressionKeepsRanksIdentical) {
  MpiCommunicator comm;
  DpSetup setup;
  const std::vector<float> plain = testing::TrainDataParallel(comm, setup);
  setup.bf16_allreduce = true;
  const std::vector<float> params = testing::TrainDataParallel(comm, setup);
  std::vector<float> root = params;
  comm.Broadcast(root.data(), static_cast<int64_t>(root.size()), 0)->Wait();
  EXPECT_EQ(root, params);
  if (comm.size() > 1) {
    EXPECT_NE(params, plain) << "nothing was rounded";
  }
  setup.per_bucket_update = true;
  EXPECT_EQ(testing::TrainDataParallel(comm, setup), params);
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
