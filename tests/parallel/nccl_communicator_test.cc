// Tests parallel/nccl_communicator.h in threads mode, through Launch (one
// worker thread per GPU, each with Worker::device_comm), and what needs no
// GPU: NCCL_CHECK's text, the NCCL id broadcast, the CPU launcher leaving
// device_comm null. Tests that need GPUs skip, saying why, where fewer are
// visible (as on the build machine). Mpi mode: nccl_mpi_test.
#include "parallel/nccl_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/event.h"
#include "parallel/launcher.h"
#include "parallel/nccl_check.h"
#include "parallel/thread_communicator.h"
#include "tests/support/sanitizer.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWorkers = 2;

// "" when `n` GPUs are visible, else why the test cannot run.
std::string NeedGpus(int n) {
  const int found = CudaDeviceCount();
  if (found >= n) return "";
  std::string why = "needs " + std::to_string(n) + " GPUs, found " +
                    std::to_string(found);
  if (found == 0) why += " (" + CudaUnavailableReason() + ")";
  return why;
}

#define SKIP_UNLESS_GPUS(n)                                           \
  do {                                                                \
    const std::string why = NeedGpus(n);                              \
    if (!why.empty()) GTEST_SKIP() << why;                            \
  } while (0)

// Runs fn on `workers` worker threads, worker i on cuda:i;
// check_collectives turns on the debug fingerprints.
void LaunchOnGpus(int workers, const std::function<void(Worker&)>& fn,
                  bool check_collectives = false) {
  LaunchOptions options;
  options.mode = "threads";
  options.workers = workers;
  options.device = "cuda";
  options.check_collectives = check_collectives;
  Launch(options, fn);
}

NcclCommunicator& Nccl(Worker& w) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(w.device_comm);
  TANDEM_CHECK(nccl != nullptr)
      << "worker " << w.rank << " on " << w.device
      << " has no NcclCommunicator as device_comm";
  return *nccl;
}

// n floats of a worker's device memory, from its backend's allocator.
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
  // Both run on the device's compute stream, like every other op.
  void Upload(const std::vector<float>& host) {
    backend_.CopyHostToDevice(host.data(), data_, n_);
  }
  std::vector<float> Download() const {
    std::vector<float> host(static_cast<size_t>(n_));
    backend_.CopyDeviceToHost(data_, host.data(), n_);
    return host;
  }

 private:
  Backend& backend_;
  int64_t n_;
  float* data_;
};

// Rank r's input: r + i * 0.5. Every sum and average over 2 ranks of these is
// exact in fp32 for the counts used here (all below 2^22).
std::vector<float> RankValues(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = rank + i * 0.5f;
  return values;
}

// Elements that differ from `expected(i)`, with the first few named.
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

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

const std::vector<int64_t> kCounts = {0, 1, 7, 1000, (int64_t{1} << 20) + 3};

// ---------------------------------------------------------------------------
// Without a GPU

TEST(NcclCheckTest, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(NCCL_CHECK(ncclSuccess));
}

TEST(NcclCheckTest, CarriesResultNameStringCallAndContext) {
  std::string text;
  try {
    NCCL_CHECK(ncclInvalidArgument) << "all-reducing " << 10 << " floats";
  } catch (const Error& e) {
    text = e.what();
  }
  EXPECT_EQ(text.rfind("all-reducing 10 floats: NCCL error "
                       "ncclInvalidArgument (",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find(ncclGetErrorString(ncclInvalidArgument)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[ncclInvalidArgument at "
                      "tests/parallel/nccl_communicator_test.cc:"),
            std::string::npos)
      << text;
}

// Rank 0's id reaches every rank byte for byte, including bytes >= 0x80.
TEST(BroadcastNcclUniqueIdTest, EveryRankGetsRankZerosId) {
  constexpr int kRanks = 3;
  ThreadGroup group(kRanks);
  std::vector<ncclUniqueId> ids(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back(
        [&, r] { ids[r] = BroadcastNcclUniqueId(group.communicator(r)); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(ids[0].internal, ids[r].internal,
                          sizeof(ids[0].internal)),
              0)
        << "rank " << r;
  }
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_NE(std::memcmp(ids[0].internal, zero.internal, sizeof(zero.internal)),
            0)
      << "rank 0's id is all zero bytes";
}

TEST(NcclLauncherTest, CpuWorkersHaveNoDeviceComm) {
  LaunchOptions options;
  options.workers = 2;
  std::atomic<int> with_device_comm{0};
  Launch(options, [&](Worker& w) {
    if (w.device_comm != nullptr) with_device_comm.fetch_add(1);
  });
  EXPECT_EQ(with_device_comm.load(), 0);
}

TEST(NcclThreadGroupTest, RejectsNoDevicesAndSharedDevices) {
  std::string text;
  try {
    NcclThreadGroup group(std::vector<int>{});
  } catch (const Error& e) {
    text = e.what();
  }
  EXPECT_NE(text.find("needs at least one device"), std::string::npos) << text;
  text.clear();
  try {
    NcclThreadGroup group(std::vector<int>{0, 1, 0});
  } catch (const Error& e) {
    text = e.what();
  }
  EXPECT_NE(text.find("ranks 0 and 2 are both on cuda:0"), std::string::npos)
      << text;
}

// ---------------------------------------------------------------------------
// With GPUs

TEST(NcclLauncherTest, CudaWorkersGetAnNcclCommunicatorEach) {
  SKIP_UNLESS_GPUS(kWorkers);
  std::mutex mu;
  std::vector<std::string> seen(kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    ASSERT_NE(w.device_comm, nullptr);
    EXPECT_EQ(w.device_comm->size(), kWorkers);
    EXPECT_EQ(w.device_comm->rank(), w.rank);
    EXPECT_EQ(Nccl(w).device(), w.device.index);
    std::lock_guard<std::mutex> lock(mu);
    seen[w.rank] = w.device_comm->Describe();
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(seen[r].rfind("NcclCommunicator(rank " + std::to_string(r) +
                                " of 2, cuda:" + std::to_string(r) + ", NCCL ",
                            0),
              0u)
        << seen[r];
  }
}

TEST(NcclLauncherTest, OneCudaWorkerGetsASingleRankCommunicator) {
  SKIP_UNLESS_GPUS(1);
  LaunchOnGpus(1, [&](Worker& w) {
    ASSERT_NE(w.device_comm, nullptr);
    EXPECT_EQ(w.device_comm->size(), 1);
    DeviceBuffer data(w, 5);
    data.Upload({1, 2, 3, 4, 5});
    w.device_comm->AllReduce(data.get(), 5, ReduceOp::kAverage);
    EXPECT_EQ(data.Download(), (std::vector<float>{1, 2, 3, 4, 5}));
  });
}

TEST(NcclCommunicatorTest, AllReduceSumAndAverageAreClosedForms) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (int64_t n : kCounts) {
      std::vector<std::vector<float>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        DeviceBuffer data(w, std::max<int64_t>(n, 1));
        data.Upload(RankValues(w.rank, std::max<int64_t>(n, 1)));
        w.device_comm->AllReduce(data.get(), n, op);
        results[w.rank] = data.Download();
        results[w.rank].resize(static_cast<size_t>(n));
      });
      // sum over r in {0, 1} of r + i/2 = 1 + i; the average is half that.
      const float scale = op == ReduceOp::kSum ? 1.f : 0.5f;
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r],
                             [&](int64_t i) { return (1.f + i) * scale; }),
                  "")
            << ToString(op) << ", count " << n << ", rank " << r;
      }
      EXPECT_TRUE(SameBits(results[0], results[1]))
          << ToString(op) << ", count " << n;
    }
  }
}

TEST(NcclCommunicatorTest, BroadcastCopiesTheRootsData) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (int root = 0; root < kWorkers; ++root) {
    for (int64_t n : kCounts) {
      std::vector<std::vector<float>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        const int64_t m = std::max<int64_t>(n, 1);
        DeviceBuffer data(w, m);
        data.Upload(RankValues(10 * w.rank, m));
        w.device_comm->Broadcast(data.get(), n, root);
        results[w.rank] = data.Download();
        results[w.rank].resize(static_cast<size_t>(n));
      });
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r],
                             [&](int64_t i) { return 10 * root + i * 0.5f; }),
                  "")
            << "root " << root << ", count " << n << ", rank " << r;
      }
    }
  }
}

TEST(NcclCommunicatorTest, AllGatherIsRankMajorInAndOutOfPlace) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (bool in_place : {false, true}) {
    for (int64_t n : kCounts) {
      std::vector<std::vector<float>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        const int64_t m = std::max<int64_t>(n, 1);
        DeviceBuffer recv(w, kWorkers * m);
        DeviceBuffer send(w, m);
        recv.Upload(std::vector<float>(kWorkers * m, -1.f));
        const float* source = send.get();
        if (in_place) {
          std::vector<float> all(kWorkers * m, -1.f);
          const std::vector<float> mine = RankValues(100 * (w.rank + 1), m);
          std::copy(mine.begin(), mine.end(), all.begin() + w.rank * n);
          recv.Upload(all);
          source = recv.get() + w.rank * n;
        } else {
          send.Upload(RankValues(100 * (w.rank + 1), m));
        }
        w.device_comm->AllGather(source, n, recv.get());
        results[w.rank] = recv.Download();
        results[w.rank].resize(static_cast<size_t>(kWorkers * n));
      });
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r],
                             [&](int64_t i) {
                               const int64_t block = i / n;
                               return 100 * (block + 1) + (i % n) * 0.5f;
                             }),
                  "")
            << (in_place ? "in place" : "out of place") << ", count " << n
            << ", rank " << r;
      }
    }
  }
}

TEST(NcclCommunicatorTest, BarrierWaitsForEveryRank) {
  SKIP_UNLESS_GPUS(kWorkers);
  std::atomic<bool> late_rank_entered{false};
  std::atomic<int> early_returns{0};
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    w.device_comm->Barrier();  // connections set up outside the timing
    if (w.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      late_rank_entered.store(true);
    }
    w.device_comm->Barrier();
    if (!late_rank_entered.load()) early_returns.fetch_add(1);
  });
  EXPECT_EQ(early_returns.load(), 0);
}

// The hot path: nothing orders AllReduceOnStream but the caller's waits, so
// the compute stream is kept busy (large GEMMs) before the copy that writes
// the input. Without the communication stream's wait, NCCL would reduce the
// zeros the buffer held before; without the compute stream's wait, the
// download would not see the result.
void CheckStreamOrderedAllReduce(bool use_queue) {
  constexpr int64_t kN = int64_t{1} << 20;
  // 2 * 4096^3 flops per GEMM, ~3 ms each (less under compute-sanitizer).
  const int64_t kM = testing::BusyGemmSide();
  std::vector<std::vector<float>> results(kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    Backend& backend = GetBackend(w.device);
    NcclCommunicator& nccl = Nccl(w);
    const cudaStream_t compute = cuda::ComputeStream(w.device.index);
    DeviceBuffer data(w, kN), staged(w, kN), a(w, kM * kM), c(w, kM * kM);
    staged.Upload(RankValues(w.rank, kN));
    backend.Fill(0.f, data.get(), kN);
    backend.Fill(1e-3f, a.get(), kM * kM);
    backend.Synchronize();
    for (int i = 0; i < 10; ++i) {
      backend.Gemm(false, false, kM, kM, kM, 1.f, a.get(), a.get(), 0.f,
                   c.get());
    }
    backend.CopyDeviceToDevice(staged.get(), data.get(), kN);  // queued last
    if (use_queue) {
      nccl.QueueAllReduce(data.get(), kN, ReduceOp::kSum);
      nccl.JoinQueued();
    } else {
      cuda::Event ready;  // on this thread's device (the launcher bound it)
      cuda::StreamWaitFor(nccl.stream(), compute, ready);
      nccl.AllReduceOnStream(data.get(), kN, ReduceOp::kSum, nccl.stream());
      cuda::StreamWaitFor(compute, nccl.stream(), ready);
    }
    results[w.rank] = data.Download();  // on the compute stream
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(Mismatches(results[r], [](int64_t i) { return 1.f + i; }), "")
        << "rank " << r << (use_queue ? " (QueueAllReduce)" : "");
  }
  EXPECT_TRUE(SameBits(results[0], results[1]));
}

TEST(NcclCommunicatorTest, AllReduceOnStreamIsOrderedByTheCallersWaits) {
  SKIP_UNLESS_GPUS(kWorkers);
  CheckStreamOrderedAllReduce(/*use_queue=*/false);
}

TEST(NcclCommunicatorTest, QueueAllReduceAndJoinQueuedOrderAgainstCompute) {
  SKIP_UNLESS_GPUS(kWorkers);
  CheckStreamOrderedAllReduce(/*use_queue=*/true);
}

// Reduce buffers (Note [Symmetric memory]): symmetric memory where NCCL can,
// zeroed, reduced in place by the queued all-reduce, and still readable
// (then freed) after the communicators are gone.
TEST(NcclCommunicatorTest, ReduceBuffersAreZeroedReducedAndOutliveTheCommunicator) {
  SKIP_UNLESS_GPUS(kWorkers);
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  for (const char* setting : {"", "0"}) {
    if (*setting) {
      setenv("TANDEM_NCCL_SYMMETRIC", setting, 1);
    } else {
      unsetenv("TANDEM_NCCL_SYMMETRIC");
    }
    std::vector<Tensor> kept(kWorkers);  // outlive Launch's communicators
    std::vector<std::vector<float>> results(kWorkers);
    std::vector<int> symmetric(kWorkers);
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      NcclCommunicator& nccl = Nccl(w);
      symmetric[w.rank] = nccl.symmetric_memory();
      for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
        Tensor buffer = nccl.NewReduceBuffer(n, w.device);
        ASSERT_EQ(buffer.shape(), (Shape{n}));
        EXPECT_EQ(Mismatches(buffer.ToVector(), [](int64_t) { return 0.f; }), "")
            << "count " << n;
        buffer.CopyFrom(Tensor::FromVector(RankValues(w.rank, n), {n}));
        nccl.QueueAllReduce(buffer.data(), n, ReduceOp::kSum);
        nccl.JoinQueued();
        results[w.rank] = buffer.ToVector();
        EXPECT_EQ(Mismatches(results[w.rank], [](int64_t i) { return 1.f + i; }), "")
            << "count " << n << ", rank " << w.rank;
        kept[w.rank] = buffer;
      }
      EXPECT_EQ(nccl.NewReduceBuffer(0, w.device).numel(), 0);
      EXPECT_THROW(nccl.NewReduceBuffer(4, Device::Cpu()), Error);
    });
    const bool expected = version >= 22700 && std::string(setting) != "0";
    for (int r = 0; r < kWorkers; ++r) {
      EXPECT_EQ(symmetric[r] != 0, expected)
          << "rank " << r << ", TANDEM_NCCL_SYMMETRIC='" << setting << "'";
      ASSERT_TRUE(kept[r].defined());
      EXPECT_EQ(kept[r].ToVector(), results[r]) << "rank " << r << " after the communicators";
    }
    kept.clear();  // freed now, without their communicators
  }
  unsetenv("TANDEM_NCCL_SYMMETRIC");
}

// The blocking calls order themselves: the same busy compute stream before
// the input's copy, and a plain AllReduce.
TEST(NcclCommunicatorTest, BlockingAllReduceWaitsForQueuedCompute) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  const int64_t kM = testing::BusyGemmSide();
  std::vector<std::vector<float>> results(kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    Backend& backend = GetBackend(w.device);
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
    w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
    backend.Scale(2.f, data.get(), kN);  // queued after the all-reduce
    results[w.rank] = data.Download();
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(Mismatches(results[r], [](int64_t i) { return 2.f * (1.f + i); }),
              "")
        << "rank " << r;
  }
}

TEST(NcclCommunicatorTest, NegativeCountsAndBadRootsNameTheCollective) {
  SKIP_UNLESS_GPUS(kWorkers);
  std::vector<std::string> errors(2 * kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    try {
      w.device_comm->Broadcast(nullptr, 4, /*root=*/kWorkers);
    } catch (const Error& e) {
      errors[2 * w.rank] = e.what();
    }
    try {
      w.device_comm->AllReduce(nullptr, -1, ReduceOp::kSum);
    } catch (const Error& e) {
      errors[2 * w.rank + 1] = e.what();
    }
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_NE(errors[2 * r].find("Broadcast #1 (16 bytes, root 2): root 2 is "
                                 "not a rank"),
              std::string::npos)
        << errors[2 * r];
    EXPECT_NE(errors[2 * r + 1].find("AllReduce #2 (-4 bytes, sum): the count "
                                     "must not be negative"),
              std::string::npos)
        << errors[2 * r + 1];
  }
}

// A worker that fails while the other waits in an NCCL collective: Launch
// aborts the NCCL ranks too, so the waiting worker wakes up with
// CollectiveAbortedError and Launch reports the original failure promptly.
TEST(NcclCommunicatorTest, FailingWorkerAbortsTheOthersCollective) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  std::mutex mu;
  std::vector<std::string> seen;
  const Clock::time_point start = Clock::now();
  std::string error;
  try {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      DeviceBuffer data(w, kN);
      data.Upload(RankValues(w.rank, kN));
      // Connections for this size are set up here, by both ranks.
      w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
      if (w.rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        throw std::runtime_error("deliberate failure on cuda:1");
      }
      try {
        w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
      } catch (const CollectiveAbortedError& e) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(e.what());
        throw;
      }
    });
  } catch (const Error& e) {
    error = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(error, "worker 1 failed: deliberate failure on cuda:1");
  EXPECT_EQ(seen, std::vector<std::string>{
                      "collective aborted: worker 1 failed: deliberate "
                      "failure on cuda:1"});
  EXPECT_LT(seconds, 30.0);
}

// Debug fingerprints (LaunchOptions::check_collectives): a rank whose
// collective differs from its peer's makes both fail, naming who called
// what, on the hot path (QueueAllReduce) and on the blocking calls, instead
// of NCCL pairing mismatched buffers.
std::string MismatchError(const std::function<void(Worker&, float*)>& collective) {
  constexpr int64_t kN = 1000;
  try {
    LaunchOnGpus(
        kWorkers,
        [&](Worker& w) {
          DeviceBuffer data(w, kN);
          data.Upload(RankValues(w.rank, kN));
          w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);  // #1 agrees
          collective(w, data.get());
        },
        /*check_collectives=*/true);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NcclCommunicatorTest, MismatchedCollectivesFailWithFingerprintsOn) {
  SKIP_UNLESS_GPUS(kWorkers);
  const std::string queued = MismatchError([](Worker& w, float* data) {
    w.device_comm->QueueAllReduce(data, w.rank == 0 ? 1000 : 500, ReduceOp::kSum);
    w.device_comm->JoinQueued();
  });
  EXPECT_NE(queued.find("ranks called different collectives"), std::string::npos)
      << queued;
  EXPECT_NE(queued.find("called AllReduce #2 (4000 bytes)"), std::string::npos) << queued;
  EXPECT_NE(queued.find("called AllReduce #2 (2000 bytes)"), std::string::npos) << queued;

  const std::string blocking = MismatchError([](Worker& w, float* data) {
    if (w.rank == 1) {
      w.device_comm->Broadcast(data, 10, 0);
    } else {
      w.device_comm->AllReduce(data, 1000, ReduceOp::kSum);
    }
  });
  EXPECT_NE(blocking.find("called AllReduce #2 (4000 bytes)"), std::string::npos)
      << blocking;
  EXPECT_NE(blocking.find("called Broadcast #2 (40 bytes)"), std::string::npos)
      << blocking;
}

// A collective that one rank never issues times out on the other, which
// aborts and names it.
TEST(NcclCommunicatorTest, CollectiveThatOneRankSkipsTimesOut) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  std::string error;
  try {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      DeviceBuffer data(w, kN);
      data.Upload(RankValues(w.rank, kN));
      w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
      if (w.rank == 1) return;  // skips the second all-reduce
      Nccl(w).set_timeout(std::chrono::milliseconds(500));
      w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
    });
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error.rfind("worker 0 failed: NcclCommunicator(rank 0 of 2, cuda:0",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("AllReduce #2 (4000 bytes, sum) did not complete "
                       "within 500 ms"),
            std::string::npos)
      << error;
}

// The hard case of Note [Abort]: the failure comes before the first
// collective, so the waiting rank is inside NCCL's connection setup (on the
// host) when it is aborted. Last in the file: if NCCL mishandles it, the
// crash takes no other test with it.
TEST(NcclCommunicatorTest, FailureBeforeTheFirstCollectiveDoesNotHang) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  const Clock::time_point start = Clock::now();
  std::string error;
  try {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      if (w.rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        throw std::runtime_error("failed before any collective");
      }
      DeviceBuffer data(w, kN);
      data.Upload(RankValues(w.rank, kN));
      w.device_comm->AllReduce(data.get(), kN, ReduceOp::kSum);
    });
  } catch (const Error& e) {
    error = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(error, "worker 1 failed: failed before any collective");
  EXPECT_LT(seconds, 60.0);
}

}  // namespace
}  // namespace tandem
