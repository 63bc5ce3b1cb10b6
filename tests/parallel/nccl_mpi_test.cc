// Tests NcclCommunicator in mpi mode under mpirun (tests/parallel/mpi_test.sh
// starts it with -np 2): Launch(--mode=mpi, --device=cuda) gives each rank an
// NCCL communicator bootstrapped over MPI. The GPU tests skip, saying why,
// unless every rank has a GPU of its own (one node: at least as many GPUs as
// ranks); the NCCL id broadcast over MPI needs no GPU and runs everywhere, so
// every rank always passes at least one test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/event.h"
#include "parallel/launcher.h"
#include "parallel/mpi_communicator.h"
#include "parallel/nccl_communicator.h"
#include "tests/support/sanitizer.h"

namespace tandem {
namespace {

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
  std::string why = "needs a GPU per rank: " + std::to_string(WorldSize()) +
                    " ranks, " + std::to_string(gpus) + " GPU(s) visible";
  if (gpus == 0) why += " (" + CudaUnavailableReason() + ")";
  return why;
}

#define SKIP_UNLESS_GPU_PER_RANK()                 \
  do {                                             \
    const std::string why = NeedGpuPerRank();      \
    if (!why.empty()) GTEST_SKIP() << why;         \
  } while (0)

void LaunchOnGpus(const std::function<void(Worker&)>& fn) {
  LaunchOptions options;
  options.mode = "mpi";
  options.device = "cuda";
  Launch(options, fn);
}

// n floats of the worker's device memory.
class DeviceBuffer {
 public:
  DeviceBuffer(Worker& w, int64_t n)
      : backend_(GetBackend(w.device)),
        n_(n),
        data_(static_cast<float*>(
            backend_.allocator().Allocate(static_cast<size_t>(n) * 4))) {}
  ~DeviceBuffer() {
    backend_.allocator().Free(data_, static_cast<size_t>(n_) * 4);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* get() const { return data_; }
  void Upload(const std::vector<float>& host) {
    backend_.CopyHostToDevice(host.data(), data_, n_);
  }
  std::vector<float> Download(int64_t n) const {
    std::vector<float> host(static_cast<size_t>(n_));
    backend_.CopyDeviceToHost(data_, host.data(), n_);
    host.resize(static_cast<size_t>(n));
    return host;
  }

 private:
  Backend& backend_;
  int64_t n_;
  float* data_;
};

std::vector<float> RankValues(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = rank + i * 0.5f;
  return values;
}

std::string Mismatches(const std::vector<float>& got,
                       const std::function<float(int64_t)>& expected) {
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    if (got[i] == expected(i)) continue;
    if (++bad <= 3) {
      first += " [" + std::to_string(i) + "] " + std::to_string(got[i]) +
               " != " + std::to_string(expected(i));
    }
  }
  return bad == 0 ? "" : std::to_string(bad) + " wrong:" + first;
}

// Whether `mine` has the same bits as rank 0's, compared over MPI.
bool SameBitsAsRankZero(const std::vector<float>& mine) {
  std::vector<float> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * 4), MPI_BYTE, 0,
            MPI_COMM_WORLD);
  return root.empty() ||
         std::memcmp(root.data(), mine.data(), root.size() * 4) == 0;
}

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

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
        const int64_t m = std::max<int64_t>(n, 1);
        DeviceBuffer data(w, m);
        data.Upload(RankValues(w.rank, m));
        w.device_comm->AllReduce(data.get(), n, op);
        const std::vector<float> got = data.Download(n);
        // sum over ranks of r + i/2 = N(N-1)/2 + N i/2, exact in fp32 here.
        auto sum = [&](int64_t i) {
          return n_ranks * (n_ranks - 1) / 2 + n_ranks * (i * 0.5f);
        };
        if (op == ReduceOp::kSum || IsPowerOfTwo(n_ranks)) {
          const float scale = op == ReduceOp::kSum ? 1.f : 1.f / n_ranks;
          EXPECT_EQ(Mismatches(got, [&](int64_t i) { return sum(i) * scale; }),
                    "")
              << ToString(op) << ", count " << n << ", rank " << w.rank;
        } else {
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_NEAR(got[i], sum(i) / n_ranks, 1e-6f * (1.f + sum(i)))
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
      const int64_t m = std::max<int64_t>(n, 1);
      for (int root = 0; root < n_ranks; ++root) {
        DeviceBuffer data(w, m);
        data.Upload(RankValues(10 * w.rank, m));
        w.device_comm->Broadcast(data.get(), n, root);
        EXPECT_EQ(Mismatches(data.Download(n),
                             [&](int64_t i) { return 10 * root + i * 0.5f; }),
                  "")
            << "Broadcast from " << root << ", count " << n << ", rank "
            << w.rank;
      }
      DeviceBuffer send(w, m), recv(w, n_ranks * m);
      send.Upload(RankValues(100 * (w.rank + 1), m));
      w.device_comm->AllGather(send.get(), n, recv.get());
      EXPECT_EQ(Mismatches(recv.Download(n_ranks * n),
                           [&](int64_t i) {
                             return 100 * (i / n + 1) + (i % n) * 0.5f;
                           }),
                "")
          << "AllGather, count " << n << ", rank " << w.rank;
    }
    w.device_comm->Barrier();
  });
}

TEST(NcclMpiTest, QueuedAllReduceIsOrderedAgainstCompute) {
  SKIP_UNLESS_GPU_PER_RANK();
  LaunchOnGpus([](Worker& w) {
    constexpr int64_t kN = int64_t{1} << 20;
    // Keeps the compute stream busy, ~30 ms (less under compute-sanitizer).
    const int64_t kM = testing::BusyGemmSide();
    Backend& backend = GetBackend(w.device);
    auto* nccl = dynamic_cast<NcclCommunicator*>(w.device_comm);
    ASSERT_NE(nccl, nullptr);
    DeviceBuffer data(w, kN), staged(w, kN), a(w, kM * kM), c(w, kM * kM);
    staged.Upload(RankValues(w.rank, kN));
    backend.Fill(0.f, data.get(), kN);
    backend.Fill(1e-3f, a.get(), kM * kM);
    backend.Synchronize();
    for (int i = 0; i < 10; ++i) {
      backend.Gemm(false, false, kM, kM, kM, 1.f, a.get(), a.get(), 0.f,
                   c.get());
    }
    backend.CopyDeviceToDevice(staged.get(), data.get(), kN);
    const cudaStream_t compute = cuda::ComputeStream(w.device.index);
    cuda::Event ready;
    cuda::StreamWaitFor(nccl->stream(), compute, ready);
    nccl->AllReduceOnStream(data.get(), kN, ReduceOp::kSum, nccl->stream());
    cuda::StreamWaitFor(compute, nccl->stream(), ready);
    const std::vector<float> got = data.Download(kN);
    const int n_ranks = w.size;
    EXPECT_EQ(Mismatches(got,
                         [&](int64_t i) {
                           return n_ranks * (n_ranks - 1) / 2 +
                                  n_ranks * (i * 0.5f);
                         }),
              "")
        << "rank " << w.rank;
    EXPECT_TRUE(SameBitsAsRankZero(got));
  });
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
