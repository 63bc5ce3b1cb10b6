// Tests NcclCommunicator in mpi mode under mpirun (tests/parallel/mpi_test.sh
// starts it with -np 2): Launch(--mode=mpi, --device=cuda) gives each rank an
// NCCL communicator bootstrapped over MPI. The GPU tests skip, saying why,
// unless every rank has a GPU of its own (one node: at least as many GPUs as
// ranks); the NCCL id broadcast over MPI needs no GPU and runs everywhere, so
// every rank always passes at least one test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "parallel/launcher.h"
#include "parallel/mpi_communicator.h"
#include "parallel/nccl_communicator.h"
#include "tests/support/rank_values.h"

namespace tandem {
namespace {

using testing::FirstN;
using testing::Mismatches;
using testing::OnDevice;
using testing::RankValues;

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// "" when every rank can have a GPU of its own, else why not. The answer is
// the same on every rank of a node, so all ranks skip together.
std::string NeedGpuPerRank() {
  const int gpus = CudaDeviceCount();
  if (gpus >= WorldSize()) return "";
  std::string why = "needs a GPU per rank: " + std::to_string(WorldSize()) + " ranks, " +
                    std::to_string(gpus) + " GPU(s) visible";
  if (gpus == 0) why += " (" + CudaUnavailableReason() + ")";
  return why;
}

#define SKIP_UNLESS_GPU_PER_RANK()             \
  do {                                         \
    const std::string why = NeedGpuPerRank();  \
    if (!why.empty()) GTEST_SKIP() << why;     \
  } while (0)

void LaunchOnGpus(const std::function<void(Worker&)>& fn, bool check_collectives = false) {
  LaunchOptions options;
  options.mode = LaunchMode::kMpi;
  options.device = "cuda";
  options.check_collectives = check_collectives;
  Launch(options, fn);
}

// Whether `mine` has the same bits as rank 0's, compared over MPI.
bool SameBitsAsRankZero(const std::vector<float>& mine) {
  std::vector<float> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * 4), MPI_BYTE, 0, MPI_COMM_WORLD);
  return testing::SameBits(root, mine);
}

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// sum over ranks of r + i/2 = N(N-1)/2 + N i/2, exact in fp32 here.
float SumOverRanks(int n_ranks, int64_t i) {
  return n_ranks * (n_ranks - 1) / 2 + n_ranks * (i * 0.5f);
}

const std::vector<int64_t> kCounts = {0, 1, 7, 1000, (int64_t{1} << 20) + 3};

TEST(NcclMpiTest, UniqueIdReachesEveryRankOverMpi) {
  MpiCommunicator host;
  const ncclUniqueId id = BroadcastNcclUniqueId(host);
  ncclUniqueId root = id;
  MPI_Bcast(root.internal, sizeof(root.internal), MPI_BYTE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.internal, id.internal, sizeof(id.internal)), 0)
      << "rank " << host.rank() << " got another id than rank 0";
}

TEST(NcclMpiTest, LaunchGivesEachRankAnNcclCommunicator) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    ASSERT_NE(w.device_comm, nullptr);
    EXPECT_EQ(w.device_comm->rank(), WorldRank());
    EXPECT_EQ(w.device_comm->size(), WorldSize());
    auto* nccl = dynamic_cast<NcclCommunicator*>(w.device_comm);
    ASSERT_NE(nccl, nullptr) << w.device_comm->Describe();
    EXPECT_EQ(nccl->device(), w.device.index);
  });
}

TEST(NcclMpiTest, AllReduceSumAndAverageAreClosedForms) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    const int n_ranks = w.size;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int64_t n : kCounts) {
        Tensor data = OnDevice(RankValues(w.rank, n), w.device);
        w.device_comm->AllReduce(data.data(), n, op)->Wait();
        const std::vector<float> got = FirstN(data, n);
        if (op == ReduceOp::kSum || IsPowerOfTwo(n_ranks)) {
          const float scale = op == ReduceOp::kSum ? 1.f : 1.f / n_ranks;
          EXPECT_EQ(Mismatches(got, [&](int64_t i) { return SumOverRanks(n_ranks, i) * scale; }),
                    "")
              << ToString(op) << ", count " << n << ", rank " << w.rank;
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const float sum = SumOverRanks(n_ranks, i);
            ASSERT_NEAR(got[i], sum / n_ranks, 1e-6f * (1.f + sum))
                << "average, count " << n << ", element " << i;
          }
        }
        EXPECT_TRUE(SameBitsAsRankZero(got))
            << ToString(op) << ", count " << n << ", rank " << w.rank;
      }
    }
  });
}

TEST(NcclMpiTest, BroadcastAllGatherAndBarrier) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    const int n_ranks = w.size;
    for (int64_t n : kCounts) {
      for (int root = 0; root < n_ranks; ++root) {
        Tensor data = OnDevice(RankValues(10 * w.rank, n), w.device);
        w.device_comm->Broadcast(data.data(), n, root)->Wait();
        EXPECT_EQ(Mismatches(FirstN(data, n), [&](int64_t i) { return 10 * root + i * 0.5f; }),
                  "")
            << "Broadcast from " << root << ", count " << n << ", rank " << w.rank;
      }
      Tensor send = OnDevice(RankValues(100 * (w.rank + 1), n), w.device);
      Tensor recv = OnDevice(std::vector<float>(static_cast<size_t>(n_ranks * n), -1.f),
                             w.device);
      w.device_comm->AllGather(send.data(), n, recv.data())->Wait();
      EXPECT_EQ(Mismatches(FirstN(recv, n_ranks * n),
                           [&](int64_t i) { return 100 * (i / n + 1) + (i % n) * 0.5f; }),
                "")
          << "AllGather, count " << n << ", rank " << w.rank;
    }
    w.device_comm->Barrier()->Wait();
  });
}

// Rank r sends RankValues(r, N n); rank q receives the sum over ranks of
// block q, in and out of place (the average exactly so for 2^k ranks).
TEST(NcclMpiTest, ReduceScatterIsTheSumOfEachRanksBlock) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    const int n_ranks = w.size;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (bool in_place : {false, true}) {
        for (int64_t n : kCounts) {
          Tensor send = OnDevice(RankValues(w.rank, n_ranks * n), w.device);
          Tensor recv = OnDevice(std::vector<float>(static_cast<size_t>(n), -1.f), w.device);
          float* out = in_place ? send.data() + w.rank * n : recv.data();
          w.device_comm->ReduceScatter(send.data(), n, out, op)->Wait();
          const std::vector<float> all = FirstN(in_place ? send : recv, n_ranks * n);
          const size_t from = in_place ? static_cast<size_t>(w.rank * n) : 0;
          const std::vector<float> got(all.begin() + from, all.begin() + from + n);
          const float scale = op == ReduceOp::kSum ? 1.f : 1.f / n_ranks;
          const bool exact = op == ReduceOp::kSum || IsPowerOfTwo(n_ranks);
          int64_t wrong = 0;
          for (int64_t i = 0; i < n; ++i) {
            const float expected = SumOverRanks(n_ranks, w.rank * n + i) * scale;
            const float tolerance = exact ? 0.f : 1e-6f * (1.f + expected);
            wrong += std::abs(got[i] - expected) > tolerance;
          }
          // No ASSERT: every rank must go on to issue the same collectives.
          EXPECT_EQ(wrong, 0) << ToString(op) << (in_place ? ", in place" : "") << ", count "
                              << n << ", rank " << w.rank;
        }
      }
    }
  });
}

// The hot path: the all-reduce follows the lane that wrote its input (busy
// with GEMMs before the copy), the main lane follows its Work, and the host
// does not wait for either.
TEST(NcclMpiTest, QueuedAllReduceIsOrderedAgainstComputeWithoutHostWaits) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    constexpr int64_t kN = int64_t{1} << 20;
    Backend& backend = GetBackend(w.device);
    const Lane main = backend.main_lane();
    const Lane side = backend.side_lane();
    Tensor staged = OnDevice(RankValues(w.rank, kN), w.device);
    Tensor data = Tensor::Zeros({kN}, w.device);
    backend.Synchronize();
    const int64_t before = cuda::HostWaitCount();  // one process per rank
    testing::KeepBusy(side, w.device);
    data.CopyFrom(staged, side);  // queued last
    std::shared_ptr<Work> work =
        w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum, CollectiveOptions{{side}});
    work->WaitOn(main);
    EXPECT_EQ(cuda::HostWaitCount(), before) << "queueing made the host wait";
    const std::vector<float> got = data.ToVector();
    EXPECT_EQ(Mismatches(got, [&](int64_t i) { return SumOverRanks(w.size, i); }), "")
        << "rank " << w.rank;
    EXPECT_TRUE(SameBitsAsRankZero(got));
  });
}

// More ranks on a node than GPUs: every rank fails alike, naming the flags,
// before NCCL refuses two ranks on one GPU or MPI_Abort ends the job.
TEST(NcclMpiTest, FewerGpusThanRanksFailsOnEveryRankNamingTheFlags) {
  const int gpus = CudaDeviceCount();
  if (gpus == 0 || gpus >= WorldSize()) {
    GTEST_SKIP() << "needs at least one GPU but fewer than the " << WorldSize()
                 << " ranks, found " << gpus;
  }
  std::string error;
  try {
    LaunchOnGpus([](Worker&) {});
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("--mode=mpi --device=cuda puts each rank on a GPU of its own, but " +
                       std::to_string(WorldSize() - gpus) + " rank(s) have none"),
            std::string::npos)
      << error;
}

// With fingerprints on (the host communicator carries the NCCL ones), a rank
// that issues another collective fails every rank, naming both calls.
TEST(NcclMpiTest, MismatchedCollectivesFailWithFingerprintsOn) {
  SKIP_UNLESS_GPU_PER_RANK();
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks to disagree, running " << WorldSize();
  std::string error;
  // The launcher would end the job on a worker's failure (MPI cannot wake
  // a rank blocked in a collective), so the worker catches it itself: the
  // fingerprint exchange already failed on every rank.
  LaunchOnGpus(
      [&](Worker& w) {
        Tensor data = OnDevice(RankValues(w.rank, 1000), w.device);
        try {
          w.device_comm->AllReduce(data.data(), w.rank == 0 ? 1000 : 500, ReduceOp::kSum)
              ->Wait();
        } catch (const Error& e) {
          error = e.what();
        }
      },
      /*check_collectives=*/true);
  EXPECT_NE(error.find("ranks called different collectives"), std::string::npos) << error;
  EXPECT_NE(error.find("called AllReduce #1 (4000 bytes)"), std::string::npos) << error;
  EXPECT_NE(error.find("called AllReduce #1 (2000 bytes)"), std::string::npos) << error;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  // Every rank exits with the verdict of all of them.
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
