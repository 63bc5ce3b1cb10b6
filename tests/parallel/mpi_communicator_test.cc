// Tests parallel/mpi_communicator.h under mpirun (tests/parallel/mpi_test.sh
// starts it with -np 2 and -np 4): the closed forms of
// thread_communicator_test with the world size from MPI, the split of large
// collectives into several MPI calls, and MPI_CHECK's message.
#include "parallel/mpi_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
      comm_.AllReduce(data.data(), count, op);
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
  comm_.AllReduce(data.data(), count, ReduceOp::kSum);
  std::vector<float> everyone(n_ * count);
  comm_.AllGather(data.data(), count, everyone.data());
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
      comm_.Broadcast(data.data(), count, root);
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
  comm.AllGather(from, count, recv.data());
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

// Collectives over INT_MAX floats need tens of GiB; a lower limit runs the
// same splitting code, with pieces that do not divide the count.
TEST_F(MpiCommunicatorTest, LargeCollectivesAreSplit) {
  comm_.set_max_elements_per_call(7);
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{20}, int64_t{1003}}) {
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = Value(rank_, i);
    comm_.AllReduce(data.data(), count, ReduceOp::kSum);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      wrong += data[i] != n_ * (i * 0.5f) + n_ * (n_ - 1) / 2;
    }
    EXPECT_EQ(wrong, 0) << "all-reduce, count " << count;

    std::vector<float> b(count, float(rank_));
    comm_.Broadcast(b.data(), count, n_ - 1);
    wrong = 0;
    for (float x : b) wrong += x != n_ - 1;
    EXPECT_EQ(wrong, 0) << "broadcast, count " << count;

    ExpectAllGather(comm_, count, /*in_place=*/false);
    ExpectAllGather(comm_, count, /*in_place=*/true);
  }
}

TEST_F(MpiCommunicatorTest, BarrierIsReusable) {
  for (int i = 0; i < 1000; ++i) comm_.Barrier();
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
    comm_.Broadcast(&x, 1, n_);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("root " + std::to_string(n_) +
                                         " is not a rank"),
              std::string::npos)
        << e.what();
  }
}

TEST(MpiRuntimeTest, ProvidesAtLeastSerializedThreads) {
  MpiRuntime again;  // MPI is running (main started it): not ours to finish
  EXPECT_FALSE(again.owns());
  EXPECT_GE(again.thread_level(), MPI_THREAD_SERIALIZED)
      << MpiRuntime::ThreadLevelName(again.thread_level());
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::MpiRuntime mpi(&argc, &argv);
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
