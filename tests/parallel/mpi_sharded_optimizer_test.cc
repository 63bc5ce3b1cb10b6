// Sharded optimizer state across MPI ranks: sharded AdamW and SGD train like
// the unsharded optimizer on the same ranks (with accumulation and clipping),
// every rank ends with rank 0's parameters bitwise, and each holds 1/N of the
// state (up to the buckets' padding).
// Run by mpi_test.sh under mpirun -np 2 and -np 4.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "parallel/mpi_communicator.h"
#include "tests/parallel/sharded_training.h"
#include "tests/support/dp_training.h"

namespace tandem {
namespace {

using testing::ShardRun;
using testing::ShardSetup;
using testing::TrainSharded;

void ExpectShardedEqualsUnsharded(MpiCommunicator& comm, ShardSetup setup,
                                  const std::string& what, double tolerance) {
  setup.shard = false;
  const ShardRun plain = TrainSharded(comm, setup);
  setup.shard = true;
  const ShardRun sharded = TrainSharded(comm, setup);
  const double diff = testing::MaxRelativeDifference(sharded.params, plain.params);
  std::cout << "rank " << comm.rank() << "/" << comm.size() << " " << what
            << ": max relative difference sharded/unsharded " << diff << "\n";
  EXPECT_LE(diff, tolerance) << what;
  // Every rank holds rank 0's parameters, bitwise.
  std::vector<float> root = sharded.params;
  comm.Broadcast(root.data(), static_cast<int64_t>(root.size()), 0)->Wait();
  EXPECT_EQ(root, sharded.params) << what;
  int64_t padded = 0;
  for (int64_t e : sharded.bucket_elements) {
    EXPECT_EQ(e % comm.size(), 0) << what;
    padded += e;
  }
  // Float32 state per element of the shard: 2 for AdamW, 1 for SGD's
  // momentum.
  const int64_t per_element = setup.optimizer == "adamw" ? 8 : 4;
  EXPECT_EQ(sharded.state_bytes, padded / comm.size() * per_element) << what;
  EXPECT_LT(sharded.state_bytes * comm.size(),
            plain.state_bytes + per_element * comm.size() *
                                    static_cast<int64_t>(sharded.bucket_elements.size()))
      << what;
}

TEST(MpiShardedOptimizerTest, ShardedEqualsUnsharded) {
  MpiCommunicator comm;
  for (const char* optimizer : {"adamw", "sgd"}) {
    ShardSetup setup;
    setup.optimizer = optimizer;
    // Open MPI may add the ranks' gradients in another order for its
    // reduce-scatter than for its all-reduce, so they can differ in their
    // last bits. SGD passes that on as it is; AdamW moves each weight by
    // about lr per step whatever the gradient's scale, so it shows as an
    // absolute difference of a few lr * 1e-7, which near-zero weights turn
    // into up to 1e-4 by MaxRelativeDifference's floor of 1e-3.
    const double tolerance = std::string(optimizer) == "adamw" ? 1e-4 : 1e-5;
    ExpectShardedEqualsUnsharded(comm, setup, optimizer, tolerance);
    setup.batch = 6;
    setup.micro_steps = 2;
    ExpectShardedEqualsUnsharded(comm, setup, std::string(optimizer) + ", 2 micro-steps",
                                 tolerance);
  }
}

// See ShardedOptimizerTest.ClippingByTheGlobalNormEqualsUnsharded for the
// tolerance.
TEST(MpiShardedOptimizerTest, ClippingByTheGlobalNorm) {
  MpiCommunicator comm;
  ShardSetup setup;
  setup.clip = 0.05f;
  ExpectShardedEqualsUnsharded(comm, setup, "adamw clipped", 1e-4);
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
