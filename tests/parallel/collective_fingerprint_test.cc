// Tests parallel/collective_fingerprint.h: the comparison and its message,
// the exchange over a host communicator, and the Communicator preamble
// using it over a fingerprint channel (ThreadCommunicator here; the NCCL use
// is in nccl_communicator_test, the MPI one in mpi_communicator_test).
#include "parallel/collective_fingerprint.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "parallel/thread_communicator.h"

namespace tandem {
namespace {

// The numbers travel between ranks: they must not change.
TEST(FingerprintKindTest, NumbersTheSixCollectives) {
  EXPECT_EQ(FingerprintKind(CollectiveKind::kAllReduce), 0);
  EXPECT_EQ(FingerprintKind(CollectiveKind::kBroadcast), 1);
  EXPECT_EQ(FingerprintKind(CollectiveKind::kBarrier), 2);
  EXPECT_EQ(FingerprintKind(CollectiveKind::kAllGather), 3);
  EXPECT_EQ(FingerprintKind(CollectiveKind::kWindowRegister), 4);
  EXPECT_EQ(FingerprintKind(CollectiveKind::kReduceScatter), 5);
  EXPECT_EQ(kNumCollectiveKinds, 6);
  EXPECT_STREQ(ToString(CollectiveKind::kWindowRegister), "WindowRegister");
  EXPECT_STREQ(ToString(CollectiveKind::kReduceScatter), "ReduceScatter");
}

TEST(FingerprintDTypeTest, NumbersTheDTypes) {
  EXPECT_EQ(FingerprintDType(DType::kFloat32), 0);
  EXPECT_EQ(FingerprintDType(DType::kBFloat16), 1);
  EXPECT_EQ(Fingerprint().dtype, FingerprintDType(DType::kFloat32));
}

TEST(CheckFingerprintsAgreeTest, AgreeingRanksPass) {
  const Fingerprint f{7, FingerprintKind(CollectiveKind::kAllReduce), 1000};
  EXPECT_NO_THROW(CheckFingerprintsAgree({f, f, f}, 1));
}

TEST(CheckFingerprintsAgreeTest, NamesThisRankAndEveryRankThatDiffers) {
  const Fingerprint all_reduce{3, FingerprintKind(CollectiveKind::kAllReduce), 1000};
  const Fingerprint broadcast{3, FingerprintKind(CollectiveKind::kBroadcast), 10};
  const Fingerprint later{4, FingerprintKind(CollectiveKind::kAllReduce), 1000};
  try {
    CheckFingerprintsAgree({all_reduce, broadcast, all_reduce, later}, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("ranks called different collectives: rank 0 called AllReduce "
                        "#3 (4000 bytes) but rank 1 called Broadcast #3 (40 bytes); "
                        "rank 3 called AllReduce #4 (4000 bytes)"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("rank 2"), std::string::npos) << text;
  }
}

// The same count in another dtype is another collective: the message gives
// each call's bytes and names the dtype unless it is float32.
TEST(CheckFingerprintsAgreeTest, NamesTheDTypes) {
  const int64_t bf16 = FingerprintDType(DType::kBFloat16);
  const Fingerprint wide{3, FingerprintKind(CollectiveKind::kAllReduce), 1000};
  const Fingerprint half{3, FingerprintKind(CollectiveKind::kAllReduce), 1000, bf16};
  EXPECT_NO_THROW(CheckFingerprintsAgree({half, half}, 1));
  try {
    CheckFingerprintsAgree({half, wide}, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ranks called different collectives: rank 0 called "
                                         "AllReduce #3 (2000 bytes, bfloat16) but rank 1 "
                                         "called AllReduce #3 (4000 bytes)"),
              std::string::npos)
        << e.what();
  }
}

// Runs fn(rank, communicator) on `size` threads; returns each rank's error
// text ("" if it returned).
std::vector<std::string> RunRanks(int size,
                                  const std::function<void(int, Communicator&)>& fn) {
  ThreadGroup group(size);
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        fn(rank, group.communicator(rank));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(CheckFingerprintTest, ValuesTravelExactlyAndAgreeingRanksPass) {
  // Beyond float's 24-bit mantissa and 32 bits: the 16-bit pieces keep them.
  const Fingerprint big{(int64_t{1} << 40) + 12345, FingerprintKind(CollectiveKind::kAllGather),
                        (int64_t{1} << 33) + 1, FingerprintDType(DType::kBFloat16)};
  const auto errors = RunRanks(3, [&](int, Communicator& host) {
    CheckFingerprint(host, big);
  });
  EXPECT_EQ(errors, std::vector<std::string>(3, ""));
}

TEST(CheckFingerprintTest, EveryRankThrowsOnAMismatch) {
  const auto errors = RunRanks(3, [&](int rank, Communicator& host) {
    const int64_t count = rank == 2 ? (int64_t{1} << 30) + 1 : (int64_t{1} << 30);
    CheckFingerprint(host, {5, FingerprintKind(CollectiveKind::kAllReduce), count});
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(errors[rank].find("ranks called different collectives: rank " +
                                std::to_string(rank) + " called AllReduce #5"),
              std::string::npos)
        << errors[rank];
  }
  EXPECT_NE(errors[0].find("but rank 2 called AllReduce #5 (4294967300 bytes)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[2].find("but rank 0 called AllReduce #5 (4294967296 bytes); "
                           "rank 1 called AllReduce #5 (4294967296 bytes)"),
            std::string::npos)
      << errors[2];
}

// The preamble compares every collective over the channel (a second group
// over the same ranks) before the transport sees it: a mismatch throws on
// every rank from the call itself, naming both calls, and nothing runs.
TEST(FingerprintChannelTest, MismatchThrowsFromTheCallOnEveryRank) {
  ThreadGroup channels(2);
  const auto errors = RunRanks(2, [&](int rank, Communicator& comm) {
    comm.set_fingerprint_channel(&channels.communicator(rank));
    std::vector<float> data(10, 1.0f);
    comm.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();  // #1 agrees
    EXPECT_EQ(data[0], 2.0f);
    std::shared_ptr<Work> work;
    try {
      if (rank == 1) {
        work = comm.Broadcast(data.data(), 10, 0);
      } else {
        work = comm.AllReduce(data.data(), 10, ReduceOp::kSum);
      }
    } catch (...) {
      EXPECT_EQ(work, nullptr);
      EXPECT_EQ(comm.sequence(), 2u);  // numbered before it was compared
      EXPECT_EQ(channels.communicator(rank).sequence(), 2u);
      throw;
    }
  });
  EXPECT_NE(errors[0].find("ranks called different collectives: rank 0 called AllReduce #2 "
                           "(40 bytes) but rank 1 called Broadcast #2 (40 bytes)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("ranks called different collectives: rank 1 called Broadcast #2 "
                           "(40 bytes) but rank 0 called AllReduce #2 (40 bytes)"),
            std::string::npos)
      << errors[1];
}

// Over a channel, a rank that passes another dtype is caught before the
// transport runs anything, naming each rank's call.
TEST(FingerprintChannelTest, ADTypeMismatchThrowsOnEveryRank) {
  ThreadGroup channels(2);
  const auto errors = RunRanks(2, [&](int rank, Communicator& comm) {
    comm.set_fingerprint_channel(&channels.communicator(rank));
    std::vector<uint16_t> half(10, 0x3f80);  // 1.0 in bfloat16
    comm.AllReduce(Ptr{half.data(), DType::kBFloat16}, 10, ReduceOp::kSum)->Wait();  // agrees
    EXPECT_EQ(half[0], 0x4000);  // 2.0
    // In place: rank r's 5 elements at r * 5.
    std::vector<float> data(10, 1.0f);
    if (rank == 1) {
      comm.AllGather(CPtr(half.data() + 5, DType::kBFloat16), 5,
                     Ptr{half.data(), DType::kBFloat16})
          ->Wait();
    } else {
      comm.AllGather(data.data(), 5, data.data())->Wait();
    }
  });
  EXPECT_NE(errors[0].find("rank 0 called AllGather #2 (20 bytes) but rank 1 called "
                           "AllGather #2 (10 bytes, bfloat16)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 1 called AllGather #2 (10 bytes, bfloat16) but rank 0 "
                           "called AllGather #2 (20 bytes)"),
            std::string::npos)
      << errors[1];
}

// A reduce-scatter against an all-gather of the same per-rank bytes: the
// preamble tells them apart before either transport call runs.
TEST(FingerprintChannelTest, AReduceScatterMismatchThrowsOnEveryRank) {
  ThreadGroup channels(2);
  const auto errors = RunRanks(2, [&](int rank, Communicator& comm) {
    comm.set_fingerprint_channel(&channels.communicator(rank));
    std::vector<float> send(10, 1.0f), recv(5);
    comm.ReduceScatter(send.data(), 5, recv.data(), ReduceOp::kSum)->Wait();  // #1 agrees
    EXPECT_EQ(recv[0], 2.0f);
    if (rank == 1) {
      comm.ReduceScatter(send.data(), 5, recv.data(), ReduceOp::kSum)->Wait();
    } else {
      comm.AllGather(recv.data(), 5, send.data())->Wait();
    }
  });
  EXPECT_NE(errors[0].find("rank 0 called AllGather #2 (20 bytes) but rank 1 called "
                           "ReduceScatter #2 (20 bytes)"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 1 called ReduceScatter #2 (20 bytes) but rank 0 called "
                           "AllGather #2 (20 bytes)"),
            std::string::npos)
      << errors[1];
}

}  // namespace
}  // namespace tandem
