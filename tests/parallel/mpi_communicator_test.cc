// Tests parallel/mpi_communicator.h under mpirun (tests/parallel/mpi_test.sh
// starts it with -np 1 to 4): the closed forms of thread_communicator_test
// with the world size from MPI, in float32 and bfloat16 (Note [bfloat16 over
// MPI], Note [ReduceScatter over MPI]), the split of large collectives into
// several MPI calls, MPI_CHECK's
// message, the Work semantics (the call returns at once, collectives run in
// issue order on the progress thread), and the fingerprint channel.
//
// Run with --mismatch_rank=R or --skip_rank=R it instead checks a failure
// path, which mpi_test.sh's abort mode expects to end the job with a message:
//   --mismatch_rank=R  with a fingerprint channel, rank R broadcasts while
//                      the others all-reduce: every rank fails naming both.
//   --skip_rank=R      rank R skips a barrier: the watchdog ends the job
//                      after the 2-second timeout, naming the barrier.
#include "parallel/mpi_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "parallel/mpi_check.h"

namespace tandem {
namespace {

const int64_t kCounts[] = {0, 1, 3, 7, 1000, (1 << 16) + 3};

float Value(int rank, int64_t i) { return rank + i * 0.5f; }

int EnvInt(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr ? -1 : std::atoi(text);
}

class MpiCommunicatorTest : public ::testing::Test {
 protected:
  MpiCommunicator comm_;
  const int n_ = comm_.size();
  const int rank_ = comm_.rank();
};

TEST_F(MpiCommunicatorTest, RankAndSizeComeFromMpirun) {
  EXPECT_EQ(n_, EnvInt("OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(rank_, EnvInt("OMPI_COMM_WORLD_RANK"));
  // mpirun here starts every rank on this one node.
  EXPECT_EQ(comm_.local_rank(), EnvInt("OMPI_COMM_WORLD_LOCAL_RANK"));
  EXPECT_EQ(LocalRank(), comm_.local_rank());
  EXPECT_EQ(comm_.local_size(), EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE"));
  EXPECT_TRUE(comm_.single_node());
  EXPECT_EQ(
      comm_.Describe().rfind("MpiCommunicator(rank " + std::to_string(rank_) +
                                 " of " + std::to_string(n_) + ", local rank",
                             0),
      0u)
      << comm_.Describe();
}

TEST_F(MpiCommunicatorTest, AllReduceSumAndAverageAreClosedForm) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (int64_t count : kCounts) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = Value(rank_, i);
      comm_.AllReduce(data.data(), count, op)->Wait();
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        float expected = n_ * (i * 0.5f) + n_ * (n_ - 1) / 2;
        if (op == ReduceOp::kAverage) expected *= 1.0f / n_;
        wrong += data[i] != expected;
      }
      EXPECT_EQ(wrong, 0) << ToString(op) << ", count " << count;
    }
  }
}

TEST_F(MpiCommunicatorTest, AllReduceIsBitwiseIdenticalAcrossRanks) {
  const int64_t count = 10007;
  std::vector<float> data(count);
  for (int64_t i = 0; i < count; ++i) {
    data[i] =
        std::sin(0.37f * i + 1.3f * rank_) * std::pow(10.0f, rank_ % 3 * 3);
  }
  comm_.AllReduce(data.data(), count, ReduceOp::kSum)->Wait();
  std::vector<float> everyone(n_ * count);
  comm_.AllGather(data.data(), count, everyone.data())->Wait();
  for (int r = 0; r < n_; ++r) {
    EXPECT_EQ(0, std::memcmp(everyone.data() + r * count, data.data(),
                             count * sizeof(float)))
        << "rank " << r << " differs from rank " << rank_;
  }
}

TEST_F(MpiCommunicatorTest, BroadcastFromEveryRoot) {
  for (int64_t count : kCounts) {
    for (int root = 0; root < n_; ++root) {
      std::vector<float> data(count);
      for (int64_t i = 0; i < count; ++i) data[i] = 1000.0f * rank_ + i;
      comm_.Broadcast(data.data(), count, root)->Wait();
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i)
        wrong += data[i] != 1000.0f * root + i;
      EXPECT_EQ(wrong, 0) << "count " << count << ", root " << root;
    }
  }
}

void ExpectAllGather(MpiCommunicator& comm, int64_t count, bool in_place) {
  const int n = comm.size();
  std::vector<float> recv(n * count, -1.0f);
  std::vector<float> send(count);
  for (int64_t i = 0; i < count; ++i) send[i] = Value(comm.rank(), i);
  const float* from = send.data();
  if (in_place) {
    std::copy(send.begin(), send.end(), recv.begin() + comm.rank() * count);
    from = recv.data() + comm.rank() * count;
  }
  comm.AllGather(from, count, recv.data())->Wait();
  int64_t wrong = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i)
      wrong += recv[r * count + i] != Value(r, i);
  }
  EXPECT_EQ(wrong, 0) << "count " << count << (in_place ? ", in place" : "");
}

TEST_F(MpiCommunicatorTest, AllGatherIsRankMajor) {
  for (int64_t count : kCounts) {
    ExpectAllGather(comm_, count, /*in_place=*/false);
    ExpectAllGather(comm_, count, /*in_place=*/true);
  }
}

// Rank r sends Value(r, j) for j in [0, n * count); its recv is the sum over
// ranks of block r (times 1/N for kAverage), exact in float.
void ExpectReduceScatter(MpiCommunicator& comm, int64_t count, ReduceOp op, bool in_place) {
  const int n = comm.size();
  const int me = comm.rank();
  std::vector<float> send(n * count), recv(count, -1.0f);
  for (int64_t j = 0; j < n * count; ++j) send[j] = Value(me, j);
  float* out = in_place ? send.data() + me * count : recv.data();
  comm.ReduceScatter(send.data(), count, out, op)->Wait();
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = me * count + i;
    const float sum = n * (j * 0.5f) + n * (n - 1) / 2;
    wrong += out[i] != (op == ReduceOp::kSum ? sum : sum * (1.0f / n));
  }
  EXPECT_EQ(wrong, 0) << ToString(op) << ", count " << count << (in_place ? ", in place" : "");
}

TEST_F(MpiCommunicatorTest, ReduceScatterSumAndAverageAreClosedForms) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (int64_t count : kCounts) {
      ExpectReduceScatter(comm_, count, op, /*in_place=*/false);
      ExpectReduceScatter(comm_, count, op, /*in_place=*/true);
    }
  }
}

// Collectives over INT_MAX floats need tens of GiB; a lower limit runs the
// same splitting code, with pieces that do not divide the count.
TEST_F(MpiCommunicatorTest, LargeCollectivesAreSplit) {
  comm_.set_max_elements_per_call(7);
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{20}, int64_t{1003}}) {
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = Value(rank_, i);
    comm_.AllReduce(data.data(), count, ReduceOp::kSum)->Wait();
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      wrong += data[i] != n_ * (i * 0.5f) + n_ * (n_ - 1) / 2;
    }
    EXPECT_EQ(wrong, 0) << "all-reduce, count " << count;

    std::vector<float> b(count, float(rank_));
    comm_.Broadcast(b.data(), count, n_ - 1)->Wait();
    wrong = 0;
    for (float x : b) wrong += x != n_ - 1;
    EXPECT_EQ(wrong, 0) << "broadcast, count " << count;

    ExpectAllGather(comm_, count, /*in_place=*/false);
    ExpectAllGather(comm_, count, /*in_place=*/true);
    ExpectReduceScatter(comm_, count, ReduceOp::kSum, /*in_place=*/false);
    ExpectReduceScatter(comm_, count, ReduceOp::kAverage, /*in_place=*/true);
  }
}

TEST_F(MpiCommunicatorTest, BarrierIsReusable) {
  for (int i = 0; i < 1000; ++i) comm_.Barrier()->Wait();
}

TEST_F(MpiCommunicatorTest, MpiCheckCarriesTheMpiError) {
  // Every rank makes the same bad call, which MPI rejects before any
  // communication, and gets the code back on our MPI_ERRORS_RETURN dup.
  float x = 0;
  std::string error;
  try {
    MPI_CHECK(MPI_Bcast(&x, 1, MPI_FLOAT, -5, comm_.comm())) << "test call";
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("test call: MPI_ERR_ROOT"), std::string::npos) << error;
  EXPECT_NE(error.find("MPI_Bcast(&x, 1, MPI_FLOAT, -5, comm_.comm())"),
            std::string::npos)
      << error;
}

TEST_F(MpiCommunicatorTest, RejectsBadRootBeforeCallingMpi) {
  float x = 0;
  try {
    comm_.Broadcast(&x, 1, n_)->Wait();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("root " + std::to_string(n_) +
                                         " is not a rank"),
              std::string::npos)
        << e.what();
  }
}

// The call returns at once and the exchange runs on the progress thread:
// rank 0's all-reduce is still pending while the others have not issued it.
TEST_F(MpiCommunicatorTest, WorkCompletesOnceEveryRankHasIssued) {
  float x = rank_ + 1.0f;
  if (rank_ != 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::shared_ptr<Work> work = comm_.AllReduce(&x, 1, ReduceOp::kSum);
  if (rank_ == 0 && n_ > 1) {
    EXPECT_FALSE(work->IsCompleted());
    EXPECT_FALSE(work->ReadyForLanes());
  }
  work->Wait();
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_TRUE(work->ReadyForLanes());
  EXPECT_EQ(x, n_ * (n_ + 1) / 2);
}

TEST_F(MpiCommunicatorTest, QueuedCollectivesRunInIssueOrder) {
  int64_t wrong = 0;
  for (int step = 0; step < 50; ++step) {
    const int64_t count = step % 13;
    std::vector<float> data(count, float(rank_ + step));
    std::vector<float> gathered(n_ * count);
    std::vector<float> scattered(count);
    std::vector<float> b(count, float(rank_));
    std::vector<std::shared_ptr<Work>> works;
    works.push_back(comm_.AllReduce(data.data(), count, ReduceOp::kSum));
    // Reads what the all-reduce wrote: it runs after it.
    works.push_back(comm_.AllGather(data.data(), count, gathered.data()));
    // And this what the all-gather wrote.
    works.push_back(comm_.ReduceScatter(gathered.data(), count, scattered.data(), ReduceOp::kSum));
    works.push_back(comm_.Broadcast(b.data(), count, step % n_));
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->Wait();
    const float sum = n_ * step + n_ * (n_ - 1) / 2.0f;
    for (float x : data) wrong += x != sum;
    for (float x : gathered) wrong += x != sum;
    for (float x : scattered) wrong += x != n_ * sum;
    for (float x : b) wrong += x != step % n_;
  }
  EXPECT_EQ(wrong, 0);
}

TEST_F(MpiCommunicatorTest, TimedWorkMeasuresTheCollective) {
  std::vector<float> data(1000, 1.0f);
  CollectiveOptions timed;
  timed.timed = true;
  std::shared_ptr<Work> work = comm_.AllReduce(data.data(), data.size(), ReduceOp::kSum, timed);
  EXPECT_NE(work->started(), nullptr);
  EXPECT_NE(work->finished(), nullptr);
  if (work->started() != nullptr && work->finished() != nullptr) {
    EXPECT_GE(work->finished()->ElapsedMsSince(*work->started()), 0.0);
  }
  work->Wait();
  EXPECT_EQ(data[999], float(n_));
}

// With a channel (a second MpiCommunicator over the same ranks), the
// preamble compares every collective before it runs: agreeing ranks pass,
// and a mismatch throws on every rank from the call, naming both calls.
TEST_F(MpiCommunicatorTest, FingerprintChannelCatchesMismatches) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) {
    // See Note [MPI thread levels]: a second communicator is refused.
    std::string error;
    try {
      MpiCommunicator channel;
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("needs MPI_THREAD_MULTIPLE"), std::string::npos) << error;
    return;
  }
  MpiCommunicator channel;
  comm_.set_fingerprint_channel(&channel);
  std::vector<float> data(10, 1.0f);
  for (int i = 0; i < 20; ++i) comm_.AllReduce(data.data(), 1, ReduceOp::kSum)->Wait();
  comm_.Barrier()->Wait();
  if (n_ >= 2) {
    std::string error;
    try {
      if (rank_ == n_ - 1) {
        comm_.Broadcast(data.data(), 10, 0)->Wait();
      } else {
        comm_.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
      }
    } catch (const Error& e) {
      error = e.what();
    }
    const std::string odd = "Broadcast #22 (40 bytes)";
    const std::string even = "AllReduce #22 (40 bytes)";
    EXPECT_NE(error.find("ranks called different collectives: rank " + std::to_string(rank_) +
                         " called " + (rank_ == n_ - 1 ? odd : even)),
              std::string::npos)
        << error;
    EXPECT_NE(error.find(rank_ == n_ - 1 ? even : odd), std::string::npos) << error;
  }
  // Nothing ran, so both communicators go on in step.
  comm_.set_fingerprint_channel(nullptr);
  comm_.Barrier()->Wait();
  channel.Barrier()->Wait();
}

// ---------------------------------------------------------------------------
// bfloat16 (see Note [bfloat16 over MPI])

// r + (i % 32) / 2: every value and every sum over 4 ranks is exact in
// bfloat16 (at most 8 significant bits).
float Small(int rank, int64_t i) { return rank + (i % 32) * 0.5f; }

TEST_F(MpiCommunicatorTest, BFloat16AllReduceSumAndAverageAreClosedForms) {
  for (int64_t max_per_call : {int64_t{INT_MAX}, int64_t{7}}) {
    comm_.set_max_elements_per_call(max_per_call);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int64_t count : kCounts) {
        std::vector<uint16_t> data(count);
        for (int64_t i = 0; i < count; ++i) data[i] = FloatToBFloat16Bits(Small(rank_, i));
        comm_.AllReduce(Ptr{data.data(), DType::kBFloat16}, count, op)->Wait();
        int64_t wrong = 0;
        for (int64_t i = 0; i < count; ++i) {
          const float sum = n_ * ((i % 32) * 0.5f) + n_ * (n_ - 1) / 2;
          // The float32 result (the sum times 1/N), rounded once.
          const float expected = RoundToBFloat16(op == ReduceOp::kSum ? sum : sum * (1.0f / n_));
          wrong += BFloat16BitsToFloat(data[i]) != expected;
        }
        EXPECT_EQ(wrong, 0) << ToString(op) << ", count " << count << ", at most "
                            << max_per_call << " per call";
      }
    }
  }
}

// Sums that bfloat16 cannot hold: the result is MPI's float32 all-reduce of
// the same values, rounded once, and the same bits on every rank.
TEST_F(MpiCommunicatorTest, BFloat16AllReduceRoundsTheFloat32SumOnce) {
  const int64_t count = 10007;
  std::vector<uint16_t> data(count);
  std::vector<float> wide(count);
  for (int64_t i = 0; i < count; ++i) {
    const float x = std::sin(0.37f * i + 1.3f * rank_) * std::pow(10.0f, rank_ % 3 * 3);
    data[i] = FloatToBFloat16Bits(x);
    wide[i] = BFloat16BitsToFloat(data[i]);
  }
  comm_.AllReduce(wide.data(), count, ReduceOp::kSum)->Wait();
  comm_.AllReduce(Ptr{data.data(), DType::kBFloat16}, count, ReduceOp::kSum)->Wait();
  int64_t wrong = 0;
  int64_t rounded = 0;
  for (int64_t i = 0; i < count; ++i) {
    wrong += data[i] != FloatToBFloat16Bits(wide[i]);
    rounded += BFloat16BitsToFloat(data[i]) != wide[i];
  }
  EXPECT_EQ(wrong, 0);
  if (n_ > 1) {
    EXPECT_GT(rounded, 0) << "no sum needed rounding; the test shows nothing";
  }
  std::vector<uint16_t> everyone(n_ * count);
  comm_.AllGather(CPtr(data.data(), DType::kBFloat16), count,
                  Ptr{everyone.data(), DType::kBFloat16})
      ->Wait();
  for (int r = 0; r < n_; ++r) {
    EXPECT_TRUE(std::equal(data.begin(), data.end(), everyone.begin() + r * count))
        << "rank " << r << " differs from rank " << rank_;
  }
}

TEST_F(MpiCommunicatorTest, BFloat16ReduceScatterSumAndAverageAreClosedForms) {
  for (int64_t max_per_call : {int64_t{INT_MAX}, int64_t{7}}) {
    comm_.set_max_elements_per_call(max_per_call);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{20}, int64_t{1003}}) {
        for (bool in_place : {false, true}) {
          std::vector<uint16_t> send(n_ * count), recv(count, 0x1234);
          for (int64_t j = 0; j < n_ * count; ++j) send[j] = FloatToBFloat16Bits(Small(rank_, j));
          uint16_t* out = in_place ? send.data() + rank_ * count : recv.data();
          comm_.ReduceScatter(CPtr(send.data(), DType::kBFloat16), count,
                              Ptr{out, DType::kBFloat16}, op)
              ->Wait();
          int64_t wrong = 0;
          for (int64_t i = 0; i < count; ++i) {
            const int64_t j = rank_ * count + i;
            const float sum = n_ * ((j % 32) * 0.5f) + n_ * (n_ - 1) / 2;
            const float expected =
                RoundToBFloat16(op == ReduceOp::kSum ? sum : sum * (1.0f / n_));
            wrong += BFloat16BitsToFloat(out[i]) != expected;
          }
          EXPECT_EQ(wrong, 0) << ToString(op) << ", count " << count
                              << (in_place ? ", in place" : "") << ", at most " << max_per_call
                              << " per call";
        }
      }
    }
  }
}

// Sums that bfloat16 cannot hold: the float32 reduce-scatter of the same
// values (in place, as the bfloat16 one runs), rounded once.
TEST_F(MpiCommunicatorTest, BFloat16ReduceScatterRoundsTheFloat32SumOnce) {
  const int64_t count = 10007;
  std::vector<uint16_t> send(n_ * count), recv(count);
  std::vector<float> wide(n_ * count);
  for (int64_t j = 0; j < n_ * count; ++j) {
    const float x = std::sin(0.37f * j + 1.3f * rank_) * std::pow(10.0f, rank_ % 3 * 3);
    send[j] = FloatToBFloat16Bits(x);
    wide[j] = BFloat16BitsToFloat(send[j]);
  }
  const float* wide_recv = wide.data() + rank_ * count;
  comm_.ReduceScatter(wide.data(), count, wide.data() + rank_ * count, ReduceOp::kSum)->Wait();
  comm_.ReduceScatter(CPtr(send.data(), DType::kBFloat16), count,
                      Ptr{recv.data(), DType::kBFloat16}, ReduceOp::kSum)
      ->Wait();
  int64_t wrong = 0;
  int64_t rounded = 0;
  for (int64_t i = 0; i < count; ++i) {
    wrong += recv[i] != FloatToBFloat16Bits(wide_recv[i]);
    rounded += BFloat16BitsToFloat(recv[i]) != wide_recv[i];
  }
  EXPECT_EQ(wrong, 0);
  if (n_ > 1) {
    EXPECT_GT(rounded, 0) << "no sum needed rounding; the test shows nothing";
  }
}

// NaNs with payloads, -0, subnormals, infinities: moved as they are.
uint16_t Pattern(int rank, int64_t i) {
  static const uint16_t kPatterns[] = {0x7fc1, 0xffff, 0x8000, 0x0001,
                                       0x7f80, 0xff80, 0x3f80, 0x807f};
  return static_cast<uint16_t>(kPatterns[(i + rank) % 8] ^ (rank << 4));
}

TEST_F(MpiCommunicatorTest, BFloat16BroadcastAndAllGatherMoveBitPatterns) {
  for (int64_t max_per_call : {int64_t{INT_MAX}, int64_t{7}}) {
    comm_.set_max_elements_per_call(max_per_call);
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) {
      int64_t wrong = 0;
      for (int root = 0; root < n_; ++root) {
        std::vector<uint16_t> data(count);
        for (int64_t i = 0; i < count; ++i) data[i] = Pattern(rank_, i);
        comm_.Broadcast(Ptr{data.data(), DType::kBFloat16}, count, root)->Wait();
        for (int64_t i = 0; i < count; ++i) wrong += data[i] != Pattern(root, i);
      }
      for (bool in_place : {false, true}) {
        std::vector<uint16_t> send(count), recv(n_ * count, 0x1234);
        for (int64_t i = 0; i < count; ++i) send[i] = Pattern(rank_, i);
        const uint16_t* from = send.data();
        if (in_place) {
          std::copy(send.begin(), send.end(), recv.begin() + rank_ * count);
          from = recv.data() + rank_ * count;
        }
        comm_.AllGather(CPtr(from, DType::kBFloat16), count, Ptr{recv.data(), DType::kBFloat16})
            ->Wait();
        for (int r = 0; r < n_; ++r) {
          for (int64_t i = 0; i < count; ++i) wrong += recv[r * count + i] != Pattern(r, i);
        }
      }
      EXPECT_EQ(wrong, 0) << "count " << count << ", at most " << max_per_call << " per call";
    }
  }
}

// A rank that passes another dtype is caught by the fingerprints, which
// name each call's bytes and dtype.
TEST_F(MpiCommunicatorTest, FingerprintChannelCatchesADTypeMismatch) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE || n_ < 2) {
    GTEST_SKIP() << "needs 2+ ranks and MPI_THREAD_MULTIPLE (a second communicator)";
  }
  MpiCommunicator channel;
  comm_.set_fingerprint_channel(&channel);
  std::vector<float> data(10, 1.0f);
  std::vector<uint16_t> half(10, 0x3f80);
  std::string error;
  try {
    if (rank_ == n_ - 1) {
      comm_.AllReduce(Ptr{half.data(), DType::kBFloat16}, 10, ReduceOp::kSum)->Wait();
    } else {
      comm_.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
    }
  } catch (const Error& e) {
    error = e.what();
  }
  const std::string half_call = "AllReduce #1 (20 bytes, bfloat16)";
  const std::string wide_call = "AllReduce #1 (40 bytes)";
  EXPECT_NE(error.find("ranks called different collectives: rank " + std::to_string(rank_) +
                       " called " + (rank_ == n_ - 1 ? half_call : wide_call)),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(rank_ == n_ - 1 ? wide_call : half_call), std::string::npos) << error;
  comm_.set_fingerprint_channel(nullptr);
  comm_.Barrier()->Wait();
  channel.Barrier()->Wait();
}

// A reduce-scatter against an all-gather of the same per-rank bytes is
// caught by the fingerprints, naming both.
TEST_F(MpiCommunicatorTest, FingerprintChannelCatchesAReduceScatterMismatch) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE || n_ < 2) {
    GTEST_SKIP() << "needs 2+ ranks and MPI_THREAD_MULTIPLE (a second communicator)";
  }
  MpiCommunicator channel;
  comm_.set_fingerprint_channel(&channel);
  std::vector<float> send(n_ * 10, 1.0f), recv(10);
  comm_.ReduceScatter(send.data(), 10, recv.data(), ReduceOp::kSum)->Wait();  // #1 agrees
  EXPECT_EQ(recv[0], float(n_));
  std::string error;
  try {
    if (rank_ == n_ - 1) {
      comm_.ReduceScatter(send.data(), 10, recv.data(), ReduceOp::kSum)->Wait();
    } else {
      comm_.AllGather(recv.data(), 10, send.data())->Wait();
    }
  } catch (const Error& e) {
    error = e.what();
  }
  const std::string scatter = "ReduceScatter #2 (40 bytes)";
  const std::string gather = "AllGather #2 (40 bytes)";
  EXPECT_NE(error.find("ranks called different collectives: rank " + std::to_string(rank_) +
                       " called " + (rank_ == n_ - 1 ? scatter : gather)),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(rank_ == n_ - 1 ? gather : scatter), std::string::npos) << error;
  comm_.set_fingerprint_channel(nullptr);
  comm_.Barrier()->Wait();
  channel.Barrier()->Wait();
}

TEST_F(MpiCommunicatorTest, RejectsANonPositiveTimeout) {
  EXPECT_THROW(comm_.set_timeout(std::chrono::milliseconds(0)), Error);
  EXPECT_NO_THROW(comm_.set_timeout(std::chrono::seconds(30)));
}

TEST(MpiRuntimeTest, ProvidesAtLeastSerializedThreads) {
  MpiRuntime again;  // MPI is running (main started it): not ours to finish
  EXPECT_FALSE(again.owns());
  EXPECT_GE(again.thread_level(), MPI_THREAD_SERIALIZED)
      << MpiRuntime::ThreadLevelName(again.thread_level());
}

}  // namespace
}  // namespace tandem

namespace tandem {

// --skip_rank: rank `skip_rank` skips barrier #2 (and idles) while the
// others enter it; the watchdog must end the job, naming the barrier.
int SkipOnPurpose(int skip_rank) {
  MpiCommunicator comm;
  comm.set_timeout(std::chrono::seconds(2));
  comm.Barrier()->Wait();  // #1, everyone
  if (comm.rank() == skip_rank) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  comm.Barrier()->Wait();  // #2, skipped by skip_rank
  return 0;  // unreachable when the watchdog works
}

// --mismatch_rank: with a fingerprint channel, rank `odd_rank` broadcasts
// while the others all-reduce; every rank fails naming both calls, and ends
// the job as the launcher does with a worker's error.
int MismatchOnPurpose(int odd_rank) {
  MpiCommunicator comm;
  MpiCommunicator channel;
  comm.set_fingerprint_channel(&channel);
  std::vector<float> data(10, 1.f);
  try {
    if (comm.rank() == odd_rank) {
      comm.Broadcast(data.data(), 10, 0)->Wait();
    } else {
      comm.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
    }
  } catch (const Error& e) {
    comm.Abort("rank " + std::to_string(comm.rank()) + " failed: " + e.what());
  }
  return 0;  // unreachable when the check works
}

}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mismatch_rank=", 16) == 0) {
      return tandem::MismatchOnPurpose(std::atoi(argv[i] + 16));
    }
    if (std::strncmp(argv[i], "--skip_rank=", 12) == 0) {
      return tandem::SkipOnPurpose(std::atoi(argv[i] + 12));
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::printf(
        "MPI thread level: %s\n",
        tandem::MpiRuntime::ThreadLevelName(mpi.thread_level()).c_str());
  }
  int failed = RUN_ALL_TESTS();
  // Every rank exits with the verdict of all of them.
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
