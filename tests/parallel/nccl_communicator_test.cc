// Tests parallel/nccl_communicator.h (with nccl_check.h, nccl_handle.h,
// nccl_thread_group.h and the NCCL implementation of device_communicators.h)
// in threads mode, mostly through Launch (one worker thread per GPU, each
// with Worker::device_comm).
//
// What needs no GPU runs everywhere: NCCL_CHECK's text, the NCCL id
// broadcast, argument checks. Cross-rank tests need two GPUs and skip,
// saying why, where fewer are visible. What one GPU can show (a single-rank
// communicator: ordering against lanes, Work, timing, Abort) is in
// nccl_work_test; mpi mode in nccl_mpi_test.
#include "parallel/nccl_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
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
#include "core/cuda/host_wait.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "parallel/device_communicators.h"
#include "parallel/launcher.h"
#include "parallel/nccl_check.h"
#include "parallel/nccl_thread_group.h"
#include "parallel/thread_communicator.h"
#include "tests/support/error_text.h"
#include "tests/support/rank_values.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
using testing::FirstN;
using testing::KeepBusy;
using testing::Mismatches;
using testing::OnDevice;
using testing::RankValues;
using testing::SameBits;

constexpr int kWorkers = 2;

// Runs fn on `workers` worker threads, worker i on cuda:i;
// check_collectives turns on the debug fingerprints.
void LaunchOnGpus(int workers, const std::function<void(Worker&)>& fn,
                  bool check_collectives = false, int gradient_comms = 1) {
  LaunchOptions options;
  options.mode = LaunchMode::kThreads;
  options.workers = workers;
  options.device = "cuda";
  options.check_collectives = check_collectives;
  options.gradient_comms = gradient_comms;
  Launch(options, fn);
}

NcclCommunicator& Nccl(Worker& w) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(w.device_comm);
  TANDEM_CHECK(nccl != nullptr) << "worker " << w.rank << " on " << w.device
                                << " has no NcclCommunicator as device_comm";
  return *nccl;
}

using testing::ErrorText;

const std::vector<int64_t> kCounts = {0, 1, 7, 1000, (int64_t{1} << 20) + 3};

// ---------------------------------------------------------------------------
// Without a GPU

TEST(NcclCheckTest, SuccessDoesNotThrow) { EXPECT_NO_THROW(NCCL_CHECK(ncclSuccess)); }

TEST(NcclCheckTest, CarriesResultNameStringCallAndContext) {
  std::string text;
  try {
    NCCL_CHECK(ncclInvalidArgument) << "all-reducing " << 10 << " floats";
  } catch (const Error& e) {
    text = e.what();
  }
  EXPECT_EQ(text.rfind("all-reducing 10 floats: NCCL error ncclInvalidArgument (", 0), 0u)
      << text;
  EXPECT_NE(text.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << text;
  EXPECT_NE(text.find("[ncclInvalidArgument at tests/parallel/nccl_communicator_test.cc:"),
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
    threads.emplace_back([&, r] { ids[r] = BroadcastNcclUniqueId(group.communicator(r)); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_EQ(std::memcmp(ids[0].internal, ids[r].internal, sizeof(ids[0].internal)), 0)
        << "rank " << r;
  }
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_NE(std::memcmp(ids[0].internal, zero.internal, sizeof(zero.internal)), 0)
      << "rank 0's id is all zero bytes";
}

TEST(NcclLauncherTest, CpuWorkersHaveNoDeviceComm) {
  LaunchOptions options;
  options.workers = 2;
  std::atomic<int> with_device_comm{0};
  Launch(options, [&](Worker& w) {
    if (w.device_comm != nullptr || !w.device_comms.empty()) with_device_comm.fetch_add(1);
  });
  EXPECT_EQ(with_device_comm.load(), 0);
}

TEST(NcclThreadGroupTest, RejectsNoDevicesAndSharedDevices) {
  std::string text = ErrorText([] { NcclThreadGroup group(std::vector<int>{}); });
  EXPECT_NE(text.find("needs at least one device"), std::string::npos) << text;
  text = ErrorText([] { NcclThreadGroup group(std::vector<int>{0, 1, 0}); });
  EXPECT_NE(text.find("ranks 0 and 2 are both on cuda:0"), std::string::npos) << text;
}

TEST(DeviceCommunicatorsTest, ACudaBuildHasThem) {
  std::string why = "not cleared";
  EXPECT_TRUE(DeviceCommunicatorsAvailable(&why));
  EXPECT_EQ(why, "");
  EXPECT_TRUE(DeviceCommunicatorsAvailable());
}

// The checks that come before NCCL is asked for anything.
TEST(DeviceCommunicatorsTest, ThreadGroupArgumentsAreChecked) {
  std::string text = ErrorText([] { MakeThreadDeviceGroup({0, 0}, 1, {}); });
  EXPECT_NE(text.find("ranks 0 and 1 are both on cuda:0"), std::string::npos) << text;
  text = ErrorText([] { MakeThreadDeviceGroup({0}, 0, {}); });
  EXPECT_NE(text.find("MakeThreadDeviceGroup: 0 communicators per rank; ask for at least 1"),
            std::string::npos)
      << text;
  ThreadGroup host(1);
  DeviceCommOptions options;
  options.fingerprint_channel = &host.communicator(0);
  text = ErrorText([&] { MakeThreadDeviceGroup({0}, 1, options); });
  EXPECT_NE(text.find("call set_fingerprint_channel on each communicator"), std::string::npos)
      << text;
  text = ErrorText([&] { MakeRankDeviceCommunicators(host.communicator(0), 0, 0, {}); });
  EXPECT_NE(text.find("MakeRankDeviceCommunicators: 0 communicators per rank"),
            std::string::npos)
      << text;
}

// ---------------------------------------------------------------------------
// With GPUs

TEST(NcclLauncherTest, OneCudaWorkerGetsASingleRankCommunicator) {
  SKIP_UNLESS_GPUS(1);
  LaunchOnGpus(1, [&](Worker& w) {
    ASSERT_NE(w.device_comm, nullptr);
    EXPECT_EQ(w.device_comm->size(), 1);
    Tensor data = OnDevice({1, 2, 3, 4, 5}, w.device);
    w.device_comm->AllReduce(data.data(), 5, ReduceOp::kAverage)->Wait();
    EXPECT_EQ(data.ToVector(), (std::vector<float>{1, 2, 3, 4, 5}));
  });
}

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
    EXPECT_EQ(seen[r].rfind("NcclCommunicator(rank " + std::to_string(r) + " of 2, cuda:" +
                                std::to_string(r) + ", NCCL ",
                            0),
              0u)
        << seen[r];
  }
}

// LaunchOptions::gradient_comms: that many independent communicators each.
TEST(NcclLauncherTest, GradientCommsAreIndependentCommunicators) {
  SKIP_UNLESS_GPUS(kWorkers);
  std::vector<std::vector<float>> results(2 * kWorkers);
  LaunchOnGpus(
      kWorkers,
      [&](Worker& w) {
        ASSERT_EQ(w.device_comms.size(), 2u);
        EXPECT_EQ(w.device_comm, w.device_comms[0]);
        EXPECT_NE(w.device_comms[0], w.device_comms[1]);
        for (int lane = 0; lane < 2; ++lane) {
          Tensor data = OnDevice(RankValues(w.rank + 10 * lane, 100), w.device);
          w.device_comms[lane]->AllReduce(data.data(), 100, ReduceOp::kSum)->Wait();
          results[2 * w.rank + lane] = data.ToVector();
        }
      },
      /*check_collectives=*/false, /*gradient_comms=*/2);
  for (int r = 0; r < kWorkers; ++r) {
    for (int lane = 0; lane < 2; ++lane) {
      // sum over ranks {0, 1} of (r + 10 lane) + i/2 = 1 + 20 lane + i.
      EXPECT_EQ(Mismatches(results[2 * r + lane], [&](int64_t i) { return 1.f + 20 * lane + i; }),
                "")
          << "rank " << r << ", lane " << lane;
    }
  }
}

TEST(NcclCommunicatorTest, AllReduceSumAndAverageAreClosedForms) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (int64_t n : kCounts) {
      std::vector<std::vector<float>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        Tensor data = OnDevice(RankValues(w.rank, n), w.device);
        w.device_comm->AllReduce(data.data(), n, op)->Wait();
        results[w.rank] = FirstN(data, n);
      });
      // sum over r in {0, 1} of r + i/2 = 1 + i; the average is half that.
      const float scale = op == ReduceOp::kSum ? 1.f : 0.5f;
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r], [&](int64_t i) { return (1.f + i) * scale; }), "")
            << ToString(op) << ", count " << n << ", rank " << r;
      }
      EXPECT_TRUE(SameBits(results[0], results[1])) << ToString(op) << ", count " << n;
    }
  }
}

TEST(NcclCommunicatorTest, BroadcastCopiesTheRootsData) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (int root = 0; root < kWorkers; ++root) {
    for (int64_t n : kCounts) {
      std::vector<std::vector<float>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        Tensor data = OnDevice(RankValues(10 * w.rank, n), w.device);
        w.device_comm->Broadcast(data.data(), n, root)->Wait();
        results[w.rank] = FirstN(data, n);
      });
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r], [&](int64_t i) { return 10 * root + i * 0.5f; }), "")
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
        const std::vector<float> mine = RankValues(100 * (w.rank + 1), n);
        std::vector<float> all(static_cast<size_t>(kWorkers * n), -1.f);
        if (in_place) std::copy(mine.begin(), mine.end(), all.begin() + w.rank * n);
        Tensor recv = OnDevice(all, w.device);
        Tensor send = OnDevice(mine, w.device);
        const float* source = in_place ? recv.data() + w.rank * n : send.data();
        w.device_comm->AllGather(source, n, recv.data())->Wait();
        results[w.rank] = FirstN(recv, kWorkers * n);
      });
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r],
                             [&](int64_t i) { return 100 * (i / n + 1) + (i % n) * 0.5f; }),
                  "")
            << (in_place ? "in place" : "out of place") << ", count " << n << ", rank " << r;
      }
    }
  }
}

// Rank r sends RankValues(r, 2n); rank q receives block q of the sum over
// r in {0, 1}: 1 + (q n + i), or half that for the average, exact.
TEST(NcclCommunicatorTest, ReduceScatterSumAndAverageAreClosedFormsInAndOutOfPlace) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (bool in_place : {false, true}) {
      std::vector<std::vector<std::vector<float>>> results(kWorkers);
      LaunchOnGpus(kWorkers, [&](Worker& w) {
        for (int64_t n : kCounts) {
          Tensor send = OnDevice(RankValues(w.rank, kWorkers * n), w.device);
          Tensor recv = OnDevice(std::vector<float>(static_cast<size_t>(n), -1.f), w.device);
          float* out = in_place ? send.data() + w.rank * n : recv.data();
          w.device_comm->ReduceScatter(send.data(), n, out, op)->Wait();
          const std::vector<float> all = FirstN(in_place ? send : recv, kWorkers * n);
          const size_t from = in_place ? static_cast<size_t>(w.rank * n) : 0;
          results[w.rank].emplace_back(all.begin() + from, all.begin() + from + n);
        }
      });
      const float scale = op == ReduceOp::kSum ? 1.f : 0.5f;
      for (size_t c = 0; c < kCounts.size(); ++c) {
        const int64_t n = kCounts[c];
        for (int q = 0; q < kWorkers; ++q) {
          EXPECT_EQ(Mismatches(results[q][c], [&](int64_t i) { return (1.f + q * n + i) * scale; }),
                    "")
              << ToString(op) << (in_place ? ", in place" : "") << ", count " << n << ", rank "
              << q;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// bfloat16 (ncclBfloat16)

// r + (i % 32) / 2: values and sums over two ranks exact in bfloat16.
std::vector<float> SmallValues(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = rank + (i % 32) * 0.5f;
  return values;
}

// bfloat16 bit patterns to and from the device, bit for bit (no rounding,
// NaN payloads kept).
Tensor BitsOnDevice(const std::vector<uint16_t>& bits, Device device) {
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(bits.size()), 1);
  Tensor host = Tensor::Full({n}, -1.f, Device::Cpu(), DType::kBFloat16);
  if (!bits.empty()) std::memcpy(host.raw_data(), bits.data(), bits.size() * sizeof(uint16_t));
  return host.To(device);
}

std::vector<uint16_t> BitsOf(const Tensor& t, int64_t n) {
  const std::vector<float> wide = FirstN(t, n);  // widening keeps every bit
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, &wide[static_cast<size_t>(i)], sizeof(word));
    bits[static_cast<size_t>(i)] = static_cast<uint16_t>(word >> 16);
  }
  return bits;
}

// In the communicator's bfloat16 reduce buffers (views of its float ones,
// symmetric memory where NCCL can), as BFloat16CompressionHook uses them.
TEST(NcclCommunicatorTest, BFloat16AllReduceSumAndAverageAreClosedForms) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    std::vector<std::vector<std::vector<float>>> results(kWorkers);
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      const Lane main = MainLane(w.device);
      for (int64_t n : kCounts) {
        Tensor half = Nccl(w).NewReduceBuffer(n, w.device, DType::kBFloat16);
        EXPECT_EQ(half.dtype(), DType::kBFloat16);
        EXPECT_EQ(half.numel(), n);
        if (n > 0) {
          half.CopyFrom(Tensor::FromVector(SmallValues(w.rank, n), {n}, Device::Cpu(),
                                           DType::kBFloat16));
        }
        w.device_comm->AllReduce(half, op, CollectiveOptions{{main}})->WaitOn(main);
        results[w.rank].push_back(FirstN(half, n));
      }
    });
    // sum over r in {0, 1} of r + (i % 32) / 2 = 1 + i % 32; the average is
    // half that; all exact in bfloat16.
    const float scale = op == ReduceOp::kSum ? 1.f : 0.5f;
    for (size_t c = 0; c < kCounts.size(); ++c) {
      for (int r = 0; r < kWorkers; ++r) {
        EXPECT_EQ(Mismatches(results[r][c], [&](int64_t i) { return (1.f + i % 32) * scale; }),
                  "")
            << ToString(op) << ", count " << kCounts[c] << ", rank " << r;
      }
      EXPECT_TRUE(SameBits(results[0][c], results[1][c])) << ToString(op) << ", count "
                                                          << kCounts[c];
    }
  }
}

// Sums bfloat16 cannot hold: two ranks add once, so each result is within
// one rounding (2^-8 relative) of the exact sum, and the same bits on both.
TEST(NcclCommunicatorTest, BFloat16AllReduceOfInexactSumsRoundsOnce) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 10007;
  auto input = [](int rank, int64_t i) {
    return RoundToBFloat16(std::sin(0.37f * i + 1.3f * rank) * (rank == 0 ? 1.f : 1000.f));
  };
  std::vector<std::vector<float>> results(kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    std::vector<float> mine(kN);
    for (int64_t i = 0; i < kN; ++i) mine[i] = input(w.rank, i);
    Tensor half = Tensor::FromVector(mine, {kN}, w.device, DType::kBFloat16);
    w.device_comm->AllReduce(half, ReduceOp::kSum)->Wait();
    results[w.rank] = FirstN(half, kN);
  });
  int64_t wrong = 0;
  int64_t rounded = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const double exact = double(input(0, i)) + input(1, i);
    wrong += std::abs(results[0][i] - exact) > std::ldexp(std::abs(exact), -8);
    rounded += results[0][i] != exact;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(rounded, 0) << "no sum needed rounding; the test shows nothing";
  EXPECT_TRUE(SameBits(results[0], results[1]));
}

// ncclReduceScatter over ncclBfloat16, through the Tensor form: sums over two
// ranks exact in bfloat16.
TEST(NcclCommunicatorTest, BFloat16ReduceScatterSumAndAverageAreClosedForms) {
  SKIP_UNLESS_GPUS(kWorkers);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    std::vector<std::vector<std::vector<float>>> results(kWorkers);
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      for (int64_t n : kCounts) {
        Tensor send = Tensor::Zeros({kWorkers * n}, w.device, DType::kBFloat16);
        Tensor recv = Tensor::Zeros({n}, w.device, DType::kBFloat16);
        if (n > 0) {
          send.CopyFrom(Tensor::FromVector(SmallValues(w.rank, kWorkers * n), {kWorkers * n},
                                           Device::Cpu(), DType::kBFloat16));
        }
        w.device_comm->ReduceScatter(send, recv, op)->Wait();
        results[w.rank].push_back(FirstN(recv, n));
      }
    });
    // Block q, element i: the sum over r in {0, 1} of r + ((q n + i) % 32) / 2.
    const float scale = op == ReduceOp::kSum ? 1.f : 0.5f;
    for (size_t c = 0; c < kCounts.size(); ++c) {
      const int64_t n = kCounts[c];
      for (int q = 0; q < kWorkers; ++q) {
        EXPECT_EQ(Mismatches(results[q][c],
                             [&](int64_t i) { return (1.f + (q * n + i) % 32) * scale; }),
                  "")
            << ToString(op) << ", count " << n << ", rank " << q;
      }
    }
  }
}

TEST(NcclCommunicatorTest, BFloat16BroadcastAndAllGatherMoveBitPatterns) {
  SKIP_UNLESS_GPUS(kWorkers);
  // NaNs with payloads (quiet and signalling), -0, subnormals, infinities.
  static const uint16_t kPatterns[] = {0x7fc1, 0xffff, 0x8000, 0x0001,
                                       0x7f81, 0xff80, 0x3f80, 0x807f};
  auto pattern = [](int rank, int64_t i) {
    return static_cast<uint16_t>(kPatterns[(i + rank) % 8] ^ (rank << 4));
  };
  auto patterns = [&](int rank, int64_t n) {
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) bits[static_cast<size_t>(i)] = pattern(rank, i);
    return bits;
  };
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1001}}) {
    std::vector<std::vector<uint16_t>> broadcast(kWorkers), gathered(kWorkers);
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      Tensor data = BitsOnDevice(patterns(w.rank, n), w.device);
      w.device_comm->Broadcast(Ptr{data.raw_data(), DType::kBFloat16}, n, /*root=*/1)->Wait();
      broadcast[w.rank] = BitsOf(data, n);
      Tensor send = BitsOnDevice(patterns(w.rank, n), w.device);
      Tensor recv = BitsOnDevice(std::vector<uint16_t>(kWorkers * n, 0x1234), w.device);
      w.device_comm->AllGather(CPtr(send.ptr()), n, recv.ptr())->Wait();
      gathered[w.rank] = BitsOf(recv, kWorkers * n);
    });
    std::vector<uint16_t> all = patterns(0, n);
    const std::vector<uint16_t> second = patterns(1, n);
    all.insert(all.end(), second.begin(), second.end());
    for (int r = 0; r < kWorkers; ++r) {
      EXPECT_EQ(broadcast[r], patterns(1, n)) << "count " << n << ", rank " << r;
      EXPECT_EQ(gathered[r], all) << "count " << n << ", rank " << r;
    }
  }
}

TEST(NcclCommunicatorTest, BarrierWaitsForEveryRank) {
  SKIP_UNLESS_GPUS(kWorkers);
  std::atomic<bool> late_rank_entered{false};
  std::atomic<int> early_returns{0};
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    w.device_comm->Barrier()->Wait();  // connections set up outside the timing
    if (w.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      late_rank_entered.store(true);
    }
    w.device_comm->Barrier()->Wait();
    if (!late_rank_entered.load()) early_returns.fetch_add(1);
  });
  EXPECT_EQ(early_returns.load(), 0);
}

// The hot path: the all-reduce follows the lane that wrote its input (kept
// busy with GEMMs before the copy that writes it) and the reader's lane
// follows the Work; the host never waits. Without the first wait NCCL would
// reduce the zeros the buffer held before; without the second the reader
// would not see the result.
void CheckQueuedAllReduce(bool side) {
  constexpr int64_t kN = int64_t{1} << 20;
  std::vector<std::vector<float>> results(kWorkers);
  std::vector<int64_t> waits(kWorkers, -1);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    Backend& backend = GetBackend(w.device);
    const Lane main = backend.main_lane();
    const Lane producer = side ? backend.side_lane() : main;
    Tensor staged = OnDevice(RankValues(w.rank, kN), w.device);
    Tensor data = Tensor::Zeros({kN}, w.device);
    backend.Synchronize();
    // The count is process-wide: both workers queue between two barriers.
    w.comm.Barrier()->Wait();
    const int64_t before = cuda::HostWaitCount();
    KeepBusy(producer, w.device);
    data.CopyFrom(staged, producer);  // queued last
    std::shared_ptr<Work> work =
        w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum, CollectiveOptions{{producer}});
    work->WaitOn(main);
    ops::Scale(main, data, 2.f);
    w.comm.Barrier()->Wait();
    waits[w.rank] = cuda::HostWaitCount() - before;
    w.comm.Barrier()->Wait();  // no worker downloads before both have counted
    results[w.rank] = data.ToVector();
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(waits[r], 0) << "rank " << r << ": queueing made the host wait";
    EXPECT_EQ(Mismatches(results[r], [](int64_t i) { return 2.f * (1.f + i); }), "")
        << "rank " << r << (side ? " (side lane)" : " (main lane)");
  }
  EXPECT_TRUE(SameBits(results[0], results[1]));
}

TEST(NcclCommunicatorTest, QueuedAllReduceFollowsTheMainLaneWithoutHostWaits) {
  SKIP_UNLESS_GPUS(kWorkers);
  CheckQueuedAllReduce(/*side=*/false);
}

TEST(NcclCommunicatorTest, QueuedAllReduceFollowsTheLanesItIsGiven) {
  SKIP_UNLESS_GPUS(kWorkers);
  CheckQueuedAllReduce(/*side=*/true);
}

// The host-waiting form orders itself too: the same busy lane before the
// input's copy, a plain AllReduce()->Wait(), and main-lane work after it.
TEST(NcclCommunicatorTest, WaitedAllReduceFollowsQueuedCompute) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  std::vector<std::vector<float>> results(kWorkers);
  LaunchOnGpus(kWorkers, [&](Worker& w) {
    const Lane main = MainLane(w.device);
    Tensor staged = OnDevice(RankValues(w.rank, kN), w.device);
    Tensor data = Tensor::Zeros({kN}, w.device);
    KeepBusy(main, w.device);
    data.CopyFrom(staged, main);
    w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
    ops::Scale(main, data, 2.f);  // queued after the all-reduce
    results[w.rank] = data.ToVector();
  });
  for (int r = 0; r < kWorkers; ++r) {
    EXPECT_EQ(Mismatches(results[r], [](int64_t i) { return 2.f * (1.f + i); }), "")
        << "rank " << r;
  }
}

// Reduce buffers (Note [Symmetric memory]): symmetric memory where NCCL can,
// zeroed, reduced in place, and still readable (then freed) after the
// communicators are gone.
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
      const Lane main = MainLane(w.device);
      for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
        Tensor buffer = nccl.NewReduceBuffer(n, w.device);
        ASSERT_EQ(buffer.shape(), (Shape{n}));
        EXPECT_EQ(Mismatches(buffer.ToVector(), [](int64_t) { return 0.f; }), "")
            << "count " << n;
        buffer.CopyFrom(Tensor::FromVector(RankValues(w.rank, n), {n}));
        nccl.AllReduce(buffer.data(), n, ReduceOp::kSum, CollectiveOptions{{main}})->WaitOn(main);
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

// A worker that fails while the other waits for an NCCL collective: Launch
// aborts the NCCL ranks too, so the waiting worker wakes up with
// CollectiveAbortedError and Launch reports the original failure promptly.
TEST(NcclCommunicatorTest, FailingWorkerAbortsTheOthersCollective) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  std::mutex mu;
  std::vector<std::string> seen;
  const Clock::time_point start = Clock::now();
  const std::string error = ErrorText([&] {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      Tensor data = OnDevice(RankValues(w.rank, kN), w.device);
      // Connections for this size are set up here, by both ranks.
      w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
      if (w.rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        throw std::runtime_error("deliberate failure on cuda:1");
      }
      try {
        w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
      } catch (const CollectiveAbortedError& e) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back(e.what());
        throw;
      }
    });
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(error, "worker 1 failed: deliberate failure on cuda:1");
  EXPECT_EQ(seen, std::vector<std::string>{
                      "collective aborted: worker 1 failed: deliberate failure on cuda:1"});
  EXPECT_LT(seconds, 30.0);
}

// Debug fingerprints (LaunchOptions::check_collectives): a rank whose
// collective differs from its peer's makes both fail, naming who called
// what, for queued and waited collectives alike, instead of NCCL pairing
// mismatched buffers.
std::string MismatchError(const std::function<void(Worker&, float*)>& collective) {
  constexpr int64_t kN = 1000;
  return ErrorText([&] {
    LaunchOnGpus(
        kWorkers,
        [&](Worker& w) {
          Tensor data = OnDevice(RankValues(w.rank, kN), w.device);
          w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();  // #1 agrees
          collective(w, data.data());
        },
        /*check_collectives=*/true);
  });
}

TEST(NcclCommunicatorTest, MismatchedCollectivesFailWithFingerprintsOn) {
  SKIP_UNLESS_GPUS(kWorkers);
  const std::string queued = MismatchError([](Worker& w, float* data) {
    const Lane main = MainLane(w.device);
    w.device_comm->AllReduce(data, w.rank == 0 ? 1000 : 500, ReduceOp::kSum, {{main}})
        ->WaitOn(main);
  });
  EXPECT_NE(queued.find("ranks called different collectives"), std::string::npos) << queued;
  EXPECT_NE(queued.find("called AllReduce #2 (4000 bytes)"), std::string::npos) << queued;
  EXPECT_NE(queued.find("called AllReduce #2 (2000 bytes)"), std::string::npos) << queued;

  const std::string waited = MismatchError([](Worker& w, float* data) {
    if (w.rank == 1) {
      w.device_comm->Broadcast(data, 10, 0)->Wait();
    } else {
      w.device_comm->AllReduce(data, 1000, ReduceOp::kSum)->Wait();
    }
  });
  EXPECT_NE(waited.find("called AllReduce #2 (4000 bytes)"), std::string::npos) << waited;
  EXPECT_NE(waited.find("called Broadcast #2 (40 bytes)"), std::string::npos) << waited;

  // The same bytes per rank, another collective.
  const std::string scattered = MismatchError([](Worker& w, float* data) {
    if (w.rank == 1) {
      w.device_comm->ReduceScatter(data, 500, data + 500, ReduceOp::kSum)->Wait();
    } else {
      w.device_comm->AllGather(data, 500, data)->Wait();
    }
  });
  EXPECT_NE(scattered.find("called ReduceScatter #2 (2000 bytes)"), std::string::npos)
      << scattered;
  EXPECT_NE(scattered.find("called AllGather #2 (2000 bytes)"), std::string::npos) << scattered;
}

// A collective that one rank never issues times out on the other, which
// aborts and names it.
TEST(NcclCommunicatorTest, CollectiveThatOneRankSkipsTimesOut) {
  SKIP_UNLESS_GPUS(kWorkers);
  constexpr int64_t kN = 1000;
  const std::string error = ErrorText([&] {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      Tensor data = OnDevice(RankValues(w.rank, kN), w.device);
      w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
      if (w.rank == 1) return;  // skips the second all-reduce
      Nccl(w).set_timeout(std::chrono::milliseconds(500));
      w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
    });
  });
  EXPECT_EQ(error.rfind("worker 0 failed: NcclCommunicator(rank 0 of 2, cuda:0", 0), 0u)
      << error;
  EXPECT_NE(error.find("AllReduce #2 (4000 bytes, sum) did not complete within 500 ms"),
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
  const std::string error = ErrorText([&] {
    LaunchOnGpus(kWorkers, [&](Worker& w) {
      if (w.rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        throw std::runtime_error("failed before any collective");
      }
      Tensor data = OnDevice(RankValues(w.rank, kN), w.device);
      w.device_comm->AllReduce(data.data(), kN, ReduceOp::kSum)->Wait();
    });
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(error, "worker 1 failed: failed before any collective");
  EXPECT_LT(seconds, 60.0);
}

}  // namespace
}  // namespace tandem
