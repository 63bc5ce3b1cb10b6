// Tests parallel/launcher.h in mpi mode under mpirun (tests/parallel/
// mpi_test.sh starts it with -np 2). Run with --fail_rank=R it instead
// checks the failure path: rank R throws while the others wait in a
// barrier, and the script expects mpirun to end with "rank R failed: ...".
#include <gtest/gtest.h>

#include <cstdlib>
#include <chrono>
#include <cstring>
#include <thread>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/launcher.h"
#include "parallel/mpi_communicator.h"

namespace tandem {
namespace {

LaunchOptions Mpi() {
  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  return options;
}

TEST(MpiLauncherTest, RankAndSizeComeFromMpi) {
  int world_rank = -1;
  int world_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int calls = 0;
  Launch(Mpi(), [&](Worker& w) {
    ++calls;
    EXPECT_EQ(w.rank, world_rank);
    EXPECT_EQ(w.size, world_size);
    EXPECT_EQ(w.comm.rank(), world_rank);
    EXPECT_EQ(w.comm.size(), world_size);
    EXPECT_EQ(w.is_root(), world_rank == 0);
    EXPECT_TRUE(w.device.is_cpu());
    float rank = w.rank;
    w.comm.AllReduce(&rank, 1, ReduceOp::kSum)->Wait();
    EXPECT_EQ(rank, world_size * (world_size - 1) / 2);
  });
  EXPECT_EQ(calls, 1);
}

// main() holds the MpiRuntime, so Launch leaves MPI running between calls.
TEST(MpiLauncherTest, LaunchesTwice) {
  for (int round = 0; round < 2; ++round) {
    Launch(Mpi(), [](Worker& w) { w.comm.Barrier()->Wait(); });
  }
}

// Rank `fail_rank` throws while the others wait in a barrier; Launch must
// end the whole job rather than leave them waiting.
int FailOnPurpose(int fail_rank) {
  Launch(Mpi(), [fail_rank](Worker& w) {
    if (w.rank == fail_rank) throw std::runtime_error("deliberate failure");
    w.comm.Barrier()->Wait();
  });
  return 0;  // unreachable when Launch works: mpirun should report failure
}

// Rank `skip_rank` skips a barrier (and then idles) while the others enter
// it: the collective watchdog must end the job, naming the barrier, after
// the 2-second timeout instead of letting it hang.
int SkipOnPurpose(int skip_rank) {
  LaunchOptions options = Mpi();
  options.collective_timeout_s = 2.0;
  Launch(options, [skip_rank](Worker& w) {
    w.comm.Barrier()->Wait();  // #1, everyone
    if (w.rank == skip_rank) {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return;
    }
    w.comm.Barrier()->Wait();  // #2, skipped by skip_rank
  });
  return 0;  // unreachable when the watchdog works
}

// With fingerprints on, rank `odd_rank` broadcasts while the others
// all-reduce: every rank must fail naming both calls, not pair them up.
int MismatchOnPurpose(int odd_rank) {
  LaunchOptions options = Mpi();
  options.check_collectives = true;
  Launch(options, [odd_rank](Worker& w) {
    std::vector<float> data(10, 1.f);
    if (w.rank == odd_rank) {
      w.comm.Broadcast(data.data(), 10, 0)->Wait();
    } else {
      w.comm.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
    }
  });
  return 0;  // unreachable when the check works
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fail_rank=", 12) == 0) {
      return tandem::FailOnPurpose(std::atoi(argv[i] + 12));
    }
    if (std::strncmp(argv[i], "--mismatch_rank=", 16) == 0) {
      return tandem::MismatchOnPurpose(std::atoi(argv[i] + 16));
    }
    if (std::strncmp(argv[i], "--skip_rank=", 12) == 0) {
      return tandem::SkipOnPurpose(std::atoi(argv[i] + 12));
    }
  }
  tandem::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
