// Tests parallel/thread_communicator.h: closed forms for every collective
// over world sizes 1-4 and awkward counts, in float32 and bfloat16 (one
// rounding of the float32 sum; bit patterns moved as they are), the fixed
// reduction order (also when each rank sums on several threads; a
// reduce-scatter gives the bits of the all-reduce's block), the Work
// semantics (the call returns at once,
// collectives run in issue order, timing, errors through Wait), and that
// abort, timeout and destruction end waits instead of hanging.
#include "parallel/thread_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend_registry.h"
#include "core/dtype.h"
#include "core/tensor.h"

#include "tests/support/error_text.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

const int64_t kCounts[] = {0, 1, 3, 7, 1000, (1 << 16) + 3};

// Runs fn(comm) on `size` threads, one per rank, and joins them. Tests use
// EXPECT (not ASSERT) before collectives so every rank issues the same ones.
void RunRanks(ThreadGroup& group,
              const std::function<void(ThreadCommunicator&)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&group, &fn, r] { fn(group.communicator(r)); });
  }
  for (std::thread& t : threads) t.join();
}

void RunRanks(int size, const std::function<void(ThreadCommunicator&)>& fn,
              int data_threads = 1) {
  ThreadGroup group(size, data_threads);
  RunRanks(group, fn);
}

// All-reduce sizes and the threads each rank sums on: one piece per rank on
// one thread, and several pieces of 32768 elements per rank (for up to 4
// ranks) on 4 threads each (Note [Summing on several threads]).
struct SumShape {
  int64_t count;
  int data_threads;
};
const SumShape kSumShapes[] = {{10007, 1}, {8 * 32768 + 7, 4}};

using testing::ErrorText;

// Rank r's element i in the closed-form tests; every sum is exact in float.
float Value(int rank, int64_t i) { return rank + i * 0.5f; }

TEST(ThreadCommunicatorTest, AllReduceSumIsClosedForm) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : kCounts) {
      RunRanks(n, [&](ThreadCommunicator& comm) {
        std::vector<float> data(count);
        for (int64_t i = 0; i < count; ++i) data[i] = Value(comm.rank(), i);
        comm.AllReduce(data.data(), count, ReduceOp::kSum)->Wait();
        int64_t wrong = 0;
        for (int64_t i = 0; i < count; ++i) {
          wrong += data[i] != n * (i * 0.5f) + n * (n - 1) / 2;
        }
        EXPECT_EQ(wrong, 0)
            << "world " << n << ", count " << count << ", rank " << comm.rank();
      });
    }
  }
}

TEST(ThreadCommunicatorTest, AllReduceAverageIsSumTimesReciprocal) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : kCounts) {
      RunRanks(n, [&](ThreadCommunicator& comm) {
        std::vector<float> data(count);
        for (int64_t i = 0; i < count; ++i) data[i] = Value(comm.rank(), i);
        comm.AllReduce(data.data(), count, ReduceOp::kAverage)->Wait();
        int64_t wrong = 0;
        for (int64_t i = 0; i < count; ++i) {
          const float sum = n * (i * 0.5f) + n * (n - 1) / 2;
          wrong += data[i] != sum * (1.0f / n);  // documented rounding
        }
        EXPECT_EQ(wrong, 0) << "world " << n << ", count " << count;
      });
    }
  }
}

// Values whose sum rounds differently in different orders, so only a fixed
// order gives the same bits everywhere. See Note [Fixed reduction order].
float Awkward(int rank, int64_t i) {
  return std::sin(0.37f * i + 1.3f * rank) * std::pow(10.0f, rank % 3 * 3);
}

std::vector<std::vector<float>> AllReduceAwkward(int n, SumShape shape) {
  std::vector<std::vector<float>> results(n);
  RunRanks(
      n,
      [&](ThreadCommunicator& comm) {
        std::vector<float> data(shape.count);
        for (int64_t i = 0; i < shape.count; ++i) data[i] = Awkward(comm.rank(), i);
        comm.AllReduce(data.data(), shape.count, ReduceOp::kSum)->Wait();
        results[comm.rank()] = data;
      },
      shape.data_threads);
  return results;
}

TEST(ThreadCommunicatorTest, AllReduceIsBitwiseIdenticalAcrossRanksAndRuns) {
  for (const SumShape& shape : kSumShapes) {
    for (int n = 2; n <= 4; ++n) {
      std::vector<float> expected(shape.count);
      for (int64_t i = 0; i < shape.count; ++i) {
        float sum = Awkward(0, i);
        for (int r = 1; r < n; ++r) sum += Awkward(r, i);  // rank order
        expected[i] = sum;
      }
      for (int run = 0; run < 2; ++run) {
        std::vector<std::vector<float>> results = AllReduceAwkward(n, shape);
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(0, std::memcmp(results[r].data(), expected.data(),
                                   shape.count * sizeof(float)))
              << "world " << n << ", count " << shape.count << ", "
              << shape.data_threads << " threads, run " << run << ", rank " << r;
        }
      }
    }
  }
}

TEST(ThreadCommunicatorTest, BroadcastFromEveryRoot) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : kCounts) {
      RunRanks(n, [&](ThreadCommunicator& comm) {
        for (int root = 0; root < n; ++root) {
          std::vector<float> data(count);
          for (int64_t i = 0; i < count; ++i) {
            data[i] = 1000.0f * comm.rank() + i;
          }
          comm.Broadcast(data.data(), count, root)->Wait();
          int64_t wrong = 0;
          for (int64_t i = 0; i < count; ++i) {
            wrong += data[i] != 1000.0f * root + i;
          }
          EXPECT_EQ(wrong, 0) << "world " << n << ", count " << count
                              << ", root " << root << ", rank " << comm.rank();
        }
      });
    }
  }
}

TEST(ThreadCommunicatorTest, AllGatherIsRankMajor) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : kCounts) {
      for (bool in_place : {false, true}) {
        RunRanks(n, [&](ThreadCommunicator& comm) {
          std::vector<float> recv(n * count, -1.0f);
          std::vector<float> send(count);
          for (int64_t i = 0; i < count; ++i) send[i] = Value(comm.rank(), i);
          const float* from = send.data();
          if (in_place) {
            std::copy(send.begin(), send.end(),
                      recv.begin() + comm.rank() * count);
            from = recv.data() + comm.rank() * count;
          }
          comm.AllGather(from, count, recv.data())->Wait();
          int64_t wrong = 0;
          for (int r = 0; r < n; ++r) {
            for (int64_t i = 0; i < count; ++i) {
              wrong += recv[r * count + i] != Value(r, i);
            }
          }
          EXPECT_EQ(wrong, 0) << "world " << n << ", count " << count
                              << (in_place ? ", in place" : "");
        });
      }
    }
  }
}

// Rank r's send for a reduce-scatter of `count` per rank: Value(r, j) at
// j in [0, n * count), in place or not; recv points at where the result
// goes. Every sum is exact in float.
struct ScatterBuffers {
  std::vector<float> send;
  std::vector<float> recv;
  float* out = nullptr;

  ScatterBuffers(int rank, int n, int64_t count, bool in_place)
      : send(n * count), recv(in_place ? 0 : count, -1.0f) {
    for (int64_t j = 0; j < n * count; ++j) send[j] = Value(rank, j);
    out = in_place ? send.data() + rank * count : recv.data();
  }
};

TEST(ThreadCommunicatorTest, ReduceScatterSumAndAverageAreClosedForms) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : kCounts) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (bool in_place : {false, true}) {
          RunRanks(n, [&](ThreadCommunicator& comm) {
            ScatterBuffers b(comm.rank(), n, count, in_place);
            comm.ReduceScatter(b.send.data(), count, b.out, op)->Wait();
            int64_t wrong = 0;
            for (int64_t i = 0; i < count; ++i) {
              const int64_t j = comm.rank() * count + i;  // this rank's block
              const float sum = n * (j * 0.5f) + n * (n - 1) / 2;
              wrong += b.out[i] != (op == ReduceOp::kSum ? sum : sum * (1.0f / n));
            }
            EXPECT_EQ(wrong, 0) << ToString(op) << ", world " << n << ", count " << count
                                << (in_place ? ", in place" : "") << ", rank " << comm.rank();
          });
        }
      }
    }
  }
}

// The same fixed order as AllReduce: rank r's result is, bit for bit, block
// r of the all-reduce of the same inputs, with one or several summing
// threads.
TEST(ThreadCommunicatorTest, ReduceScatterGivesTheBitsOfTheAllReducesBlock) {
  for (const SumShape& shape : kSumShapes) {
    for (int n = 2; n <= 4; ++n) {
      const int64_t count = shape.count;
      std::vector<std::vector<float>> reduced = AllReduceAwkward(n, {n * count, 1});
      std::vector<std::vector<float>> scattered(n);
      RunRanks(
          n,
          [&](ThreadCommunicator& comm) {
            std::vector<float> send(n * count);
            for (int64_t j = 0; j < n * count; ++j) send[j] = Awkward(comm.rank(), j);
            scattered[comm.rank()].assign(count, -1.0f);
            comm.ReduceScatter(send.data(), count, scattered[comm.rank()].data(),
                               ReduceOp::kSum)
                ->Wait();
          },
          shape.data_threads);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(0, std::memcmp(scattered[r].data(), reduced[0].data() + r * count,
                                 count * sizeof(float)))
            << "world " << n << ", count " << count << ", " << shape.data_threads
            << " threads, rank " << r;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// bfloat16

std::vector<uint16_t> ToBits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = FloatToBFloat16Bits(values[i]);
  return bits;
}

// Rank r's element i in the bfloat16 closed forms: r + (i % 32) / 2. Every
// value and every sum over 4 ranks (at most 68, in halves) has at most 8
// significant bits, so all are exact in bfloat16.
float Small(int rank, int64_t i) { return rank + (i % 32) * 0.5f; }

TEST(ThreadCommunicatorTest, BFloat16AllReduceSumAndAverageAreClosedForms) {
  for (int n = 1; n <= 4; ++n) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int64_t count : kCounts) {
        RunRanks(n, [&](ThreadCommunicator& comm) {
          std::vector<uint16_t> data(count);
          for (int64_t i = 0; i < count; ++i) {
            data[i] = FloatToBFloat16Bits(Small(comm.rank(), i));
          }
          comm.AllReduce(Ptr{data.data(), DType::kBFloat16}, count, op)->Wait();
          int64_t wrong = 0;
          for (int64_t i = 0; i < count; ++i) {
            const float sum = n * ((i % 32) * 0.5f) + n * (n - 1) / 2;
            // The float32 result (the sum times 1/N), rounded once.
            const float expected =
                RoundToBFloat16(op == ReduceOp::kSum ? sum : sum * (1.0f / n));
            wrong += BFloat16BitsToFloat(data[i]) != expected;
          }
          EXPECT_EQ(wrong, 0) << ToString(op) << ", world " << n << ", count " << count
                              << ", rank " << comm.rank();
        });
      }
    }
  }
}

// Inputs that are exact in bfloat16 but whose sums are not: the result is
// the float32 sum in rank order rounded once, bit for bit on every rank, and
// for these inputs that differs from rounding after every addition.
TEST(ThreadCommunicatorTest, BFloat16AllReduceRoundsTheFloat32SumOnce) {
  for (const SumShape& shape : kSumShapes) {
    const int64_t count = shape.count;
    for (int n = 2; n <= 4; ++n) {
      std::vector<uint16_t> expected(count);
      int64_t differs_from_stepwise = 0;
      for (int64_t i = 0; i < count; ++i) {
        float sum = RoundToBFloat16(Awkward(0, i));
        float stepwise = sum;
        for (int r = 1; r < n; ++r) {
          sum += RoundToBFloat16(Awkward(r, i));
          stepwise = RoundToBFloat16(stepwise + RoundToBFloat16(Awkward(r, i)));
        }
        expected[i] = FloatToBFloat16Bits(sum);
        differs_from_stepwise += expected[i] != FloatToBFloat16Bits(stepwise);
      }
      if (n > 2) {
        EXPECT_GT(differs_from_stepwise, 0) << "world " << n << ": inputs too tame";
      }
      std::vector<std::vector<uint16_t>> results(n);
      RunRanks(
          n,
          [&](ThreadCommunicator& comm) {
            std::vector<float> values(count);
            for (int64_t i = 0; i < count; ++i) values[i] = Awkward(comm.rank(), i);
            std::vector<uint16_t> data = ToBits(values);
            comm.AllReduce(Ptr{data.data(), DType::kBFloat16}, count, ReduceOp::kSum)->Wait();
            results[comm.rank()] = data;
          },
          shape.data_threads);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(results[r], expected) << "world " << n << ", count " << count << ", "
                                        << shape.data_threads << " threads, rank " << r;
      }
    }
  }
}

TEST(ThreadCommunicatorTest, BFloat16ReduceScatterSumAndAverageAreClosedForms) {
  for (int n = 1; n <= 4; ++n) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      for (int64_t count : kCounts) {
        for (bool in_place : {false, true}) {
          RunRanks(n, [&](ThreadCommunicator& comm) {
            const int me = comm.rank();
            std::vector<uint16_t> send(n * count), recv(count, 0x1234);
            for (int64_t j = 0; j < n * count; ++j) send[j] = FloatToBFloat16Bits(Small(me, j));
            uint16_t* out = in_place ? send.data() + me * count : recv.data();
            comm.ReduceScatter(CPtr(send.data(), DType::kBFloat16), count,
                               Ptr{out, DType::kBFloat16}, op)
                ->Wait();
            int64_t wrong = 0;
            for (int64_t i = 0; i < count; ++i) {
              const int64_t j = me * count + i;
              const float sum = n * ((j % 32) * 0.5f) + n * (n - 1) / 2;
              const float expected =
                  RoundToBFloat16(op == ReduceOp::kSum ? sum : sum * (1.0f / n));
              wrong += BFloat16BitsToFloat(out[i]) != expected;
            }
            EXPECT_EQ(wrong, 0) << ToString(op) << ", world " << n << ", count " << count
                                << (in_place ? ", in place" : "") << ", rank " << me;
          });
        }
      }
    }
  }
}

// As for AllReduce: the float32 sum in rank order of this rank's block,
// rounded once.
TEST(ThreadCommunicatorTest, BFloat16ReduceScatterRoundsTheFloat32SumOnce) {
  for (const SumShape& shape : kSumShapes) {
    const int64_t count = shape.count;
    for (int n = 2; n <= 4; ++n) {
      std::vector<std::vector<uint16_t>> results(n);
      RunRanks(
          n,
          [&](ThreadCommunicator& comm) {
            std::vector<float> values(n * count);
            for (int64_t j = 0; j < n * count; ++j) values[j] = Awkward(comm.rank(), j);
            const std::vector<uint16_t> send = ToBits(values);
            results[comm.rank()].assign(count, 0x1234);
            comm.ReduceScatter(CPtr(send.data(), DType::kBFloat16), count,
                               Ptr{results[comm.rank()].data(), DType::kBFloat16},
                               ReduceOp::kSum)
                ->Wait();
          },
          shape.data_threads);
      for (int r = 0; r < n; ++r) {
        int64_t wrong = 0;
        for (int64_t i = 0; i < count; ++i) {
          const int64_t j = r * count + i;
          float sum = RoundToBFloat16(Awkward(0, j));
          for (int q = 1; q < n; ++q) sum += RoundToBFloat16(Awkward(q, j));
          wrong += results[r][i] != FloatToBFloat16Bits(sum);
        }
        EXPECT_EQ(wrong, 0) << "world " << n << ", count " << count << ", "
                            << shape.data_threads << " threads, rank " << r;
      }
    }
  }
}

// Bit patterns no arithmetic would keep: NaNs with payloads, -0,
// subnormals, infinities.
const uint16_t kPatterns[] = {0x7fc1, 0xffff, 0x8000, 0x0001, 0x7f80, 0xff80, 0x3f80, 0x807f};

uint16_t Pattern(int rank, int64_t i) {
  return static_cast<uint16_t>(kPatterns[(i + rank) % 8] ^ (rank << 4));
}

TEST(ThreadCommunicatorTest, BFloat16BroadcastAndAllGatherMoveBitPatterns) {
  for (int n = 1; n <= 4; ++n) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) {
      RunRanks(n, [&](ThreadCommunicator& comm) {
        const int me = comm.rank();
        int64_t wrong = 0;
        for (int root = 0; root < n; ++root) {
          std::vector<uint16_t> data(count);
          for (int64_t i = 0; i < count; ++i) data[i] = Pattern(me, i);
          comm.Broadcast(Ptr{data.data(), DType::kBFloat16}, count, root)->Wait();
          for (int64_t i = 0; i < count; ++i) wrong += data[i] != Pattern(root, i);
        }
        for (bool in_place : {false, true}) {
          std::vector<uint16_t> send(count), recv(n * count, 0x1234);
          for (int64_t i = 0; i < count; ++i) send[i] = Pattern(me, i);
          const uint16_t* from = send.data();
          if (in_place) {
            std::copy(send.begin(), send.end(), recv.begin() + me * count);
            from = recv.data() + me * count;
          }
          comm.AllGather(CPtr(from, DType::kBFloat16), count,
                         Ptr{recv.data(), DType::kBFloat16})
              ->Wait();
          for (int r = 0; r < n; ++r) {
            for (int64_t i = 0; i < count; ++i) wrong += recv[r * count + i] != Pattern(r, i);
          }
        }
        EXPECT_EQ(wrong, 0) << "world " << n << ", count " << count << ", rank " << me;
      });
    }
  }
}

// The Tensor forms take the whole tensor, in its dtype.
TEST(ThreadCommunicatorTest, TensorFormsUseTheTensorsDType) {
  const int n = 3;
  RunRanks(n, [&](ThreadCommunicator& comm) {
    const float me = static_cast<float>(comm.rank());
    Tensor sum = Tensor::Full({5}, me + 0.5f, Device::Cpu(), DType::kBFloat16);
    comm.AllReduce(sum, ReduceOp::kSum)->Wait();
    EXPECT_EQ(sum.ToVector(), std::vector<float>(5, 4.5f));  // 0.5 + 1.5 + 2.5
    Tensor root = Tensor::Full({4}, me, Device::Cpu(), DType::kBFloat16);
    comm.Broadcast(root, 2)->Wait();
    EXPECT_EQ(root.ToVector(), std::vector<float>(4, 2.f));
    Tensor mine = Tensor::Full({2}, me);
    Tensor all = Tensor::Zeros({n * 2});
    comm.AllGather(mine, all)->Wait();
    EXPECT_EQ(all.ToVector(), (std::vector<float>{0, 0, 1, 1, 2, 2}));
    // Refused before anything is issued, so every rank stays in step.
    Tensor short_recv = Tensor::Zeros({n * 2 - 1});
    EXPECT_NE(ErrorText([&] { comm.AllGather(mine, short_recv)->Wait(); })
                  .find("needs a recv of 6 elements, got [5]"),
              std::string::npos);
    Tensor wide_recv = Tensor::Zeros({n * 2}, Device::Cpu(), DType::kBFloat16);
    EXPECT_NE(ErrorText([&] {
                comm.AllGather(CPtr(mine.ptr()), 2, wide_recv.ptr())->Wait();
              }).find("send is float32 but recv is bfloat16"),
              std::string::npos);
    EXPECT_EQ(comm.sequence(), 3u);
  });
}

// The Tensor form reduces into recv's dtype; sizes, dtypes and overlaps that
// cannot work are refused with the collective, the counts and the rank.
TEST(ThreadCommunicatorTest, ReduceScatterTensorFormAndBadArguments) {
  const int n = 3;
  RunRanks(n, [&](ThreadCommunicator& comm) {
    const float me = static_cast<float>(comm.rank());
    Tensor send = Tensor::Full({n * 2}, me + 0.5f, Device::Cpu(), DType::kBFloat16);
    Tensor recv = Tensor::Zeros({2}, Device::Cpu(), DType::kBFloat16);
    comm.ReduceScatter(send, recv, ReduceOp::kSum)->Wait();
    EXPECT_EQ(recv.ToVector(), std::vector<float>(2, 4.5f));  // 0.5 + 1.5 + 2.5
    // Refused before anything is issued, so every rank stays in step.
    Tensor short_send = Tensor::Zeros({n * 2 - 1}, Device::Cpu(), DType::kBFloat16);
    const std::string rank = "ThreadCommunicator(rank " + std::to_string(comm.rank()) + " of 3)";
    EXPECT_NE(ErrorText([&] { comm.ReduceScatter(short_send, recv, ReduceOp::kSum)->Wait(); })
                  .find(rank + ": ReduceScatter of 2 elements per rank over 3 ranks needs a "
                               "send of 6 elements, got [5]"),
              std::string::npos);
    Tensor wide = Tensor::Zeros({n * 2});
    EXPECT_NE(ErrorText([&] {
                comm.ReduceScatter(CPtr(wide.ptr()), 2, recv.ptr(), ReduceOp::kSum)->Wait();
              }).find(rank + ": ReduceScatter of 2 elements per rank: send is float32 but recv "
                             "is bfloat16"),
              std::string::npos);
    EXPECT_EQ(comm.sequence(), 1u);
    // Every rank makes the same mistake: recv overlaps send off its block.
    float* off_block = wide.data() + 1;
    EXPECT_NE(ErrorText([&] {
                comm.ReduceScatter(wide.data(), 2, off_block, ReduceOp::kSum)->Wait();
              }).find(rank + ": ReduceScatter #2 (8 bytes, sum): recv overlaps send without "
                             "being this rank's block of it (send + " +
                      std::to_string(comm.rank()) + " * 2)"),
              std::string::npos);
  });
}

// Ranks that pass different dtypes fail on every rank, the message naming
// each call with its size in bytes and its dtype.
TEST(ThreadCommunicatorTest, MismatchedDTypesThrowOnEveryRank) {
  ThreadGroup group(2);
  std::vector<std::string> errors(2);
  RunRanks(group, [&](ThreadCommunicator& comm) {
    std::vector<float> data(10, 1.0f);
    std::vector<uint16_t> half(10, 0x3f80);
    errors[comm.rank()] = ErrorText([&] {
      if (comm.rank() == 1) {
        comm.AllReduce(Ptr{half.data(), DType::kBFloat16}, 10, ReduceOp::kSum)->Wait();
      } else {
        comm.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
      }
    });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ranks called different collectives: rank 0 called AllReduce #1 "
                             "(40 bytes, sum) but rank 1 called AllReduce #1 (20 bytes, "
                             "bfloat16, sum)"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(ThreadCommunicatorTest, TypedReduceBuffersAreZeroedHostMemory) {
  ThreadGroup group(1);
  Communicator& comm = group.communicator(0);
  Tensor half = comm.NewReduceBuffer(7, Device::Cpu(), DType::kBFloat16);
  EXPECT_EQ(half.dtype(), DType::kBFloat16);
  EXPECT_EQ(half.shape(), Shape{7});
  EXPECT_EQ(half.ToVector(), std::vector<float>(7, 0.f));
  EXPECT_EQ(comm.NewReduceBuffer(0, Device::Cpu(), DType::kBFloat16).numel(), 0);
  EXPECT_EQ(comm.NewReduceBuffer(3, Device::Cpu(), DType::kFloat32).dtype(), DType::kFloat32);
}

TEST(ThreadCommunicatorTest, BarrierIsReusable) {
  const int n = 4;
  const int rounds = 20000;
  std::atomic<int> arrived{0};
  std::atomic<int> wrong{0};
  RunRanks(n, [&](ThreadCommunicator& comm) {
    for (int round = 0; round < rounds; ++round) {
      arrived.fetch_add(1);
      comm.Barrier()->Wait();
      // Everyone has counted this round, and nobody can count the next one
      // before this rank reaches the second barrier.
      if (arrived.load() != n * (round + 1)) wrong.fetch_add(1);
      comm.Barrier()->Wait();
    }
    EXPECT_EQ(comm.sequence(), 2u * rounds);
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(arrived.load(), n * rounds);
}

TEST(ThreadCommunicatorTest, MixedCollectivesKeepTheirOrder) {
  const int n = 3;
  RunRanks(n, [&](ThreadCommunicator& comm) {
    int64_t wrong = 0;
    for (int step = 0; step < 300; ++step) {
      const int64_t count = step % 17;  // many not divisible by 3, some 0
      std::vector<float> data(count, float(comm.rank() + step));
      comm.AllReduce(data.data(), count, ReduceOp::kSum)->Wait();
      for (float x : data) wrong += x != 3.0f * step + 3;
      std::vector<float> gathered(n * count);
      comm.AllGather(data.data(), count, gathered.data())->Wait();
      for (float x : gathered) wrong += x != 3.0f * step + 3;
      comm.ReduceScatter(gathered.data(), count, data.data(), ReduceOp::kSum)->Wait();
      for (float x : data) wrong += x != 3.0f * (3.0f * step + 3);
      std::vector<float> b(count, float(comm.rank()));
      comm.Broadcast(b.data(), count, step % n)->Wait();
      for (float x : b) wrong += x != step % n;
      if (step % 5 == 0) comm.Barrier()->Wait();
    }
    EXPECT_EQ(wrong, 0);
  });
}

// Collectives issued without waiting run in issue order: the all-gather
// reads what the all-reduce before it wrote, on every rank.
TEST(ThreadCommunicatorTest, QueuedCollectivesRunInIssueOrder) {
  const int n = 3;
  RunRanks(n, [&](ThreadCommunicator& comm) {
    int64_t wrong = 0;
    for (int step = 0; step < 100; ++step) {
      const int64_t count = step % 13;
      std::vector<float> data(count, float(comm.rank() + step));
      std::vector<float> gathered(n * count);
      std::vector<float> b(count, float(comm.rank()));
      std::vector<std::shared_ptr<Work>> works;
      works.push_back(comm.AllReduce(data.data(), count, ReduceOp::kSum));
      works.push_back(comm.AllGather(data.data(), count, gathered.data()));
      works.push_back(comm.Broadcast(b.data(), count, step % n));
      works.push_back(comm.Barrier());
      for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->Wait();
      for (const auto& work : works) wrong += !work->IsCompleted();
      for (float x : data) wrong += x != 3.0f * step + 3;
      for (float x : gathered) wrong += x != 3.0f * step + 3;
      for (float x : b) wrong += x != step % n;
    }
    EXPECT_EQ(wrong, 0) << "rank " << comm.rank();
  });
}

// The call returns at once; the exchange runs on the progress thread, and
// completes only once every rank has issued the collective.
TEST(ThreadCommunicatorTest, WorkCompletesOnceEveryRankHasIssued) {
  ThreadGroup group(2);
  std::promise<void> issued;
  std::shared_future<void> rank0_issued = issued.get_future().share();
  bool pending_before = false;
  bool ready_before = true;
  float result = 0;
  RunRanks(group, [&](ThreadCommunicator& comm) {
    float x = comm.rank() + 1.0f;
    if (comm.rank() == 1) {
      rank0_issued.wait();  // arrives only after rank 0 has looked
      comm.AllReduce(&x, 1, ReduceOp::kSum)->Wait();
      return;
    }
    std::shared_ptr<Work> work = comm.AllReduce(&x, 1, ReduceOp::kSum);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pending_before = !work->IsCompleted();
    ready_before = work->ReadyForLanes();
    issued.set_value();
    work->Wait();
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_TRUE(work->ReadyForLanes());
    result = x;
  });
  EXPECT_TRUE(pending_before) << "rank 0's all-reduce finished without rank 1";
  EXPECT_FALSE(ready_before) << "a host Work is ready for lanes only once finished";
  EXPECT_EQ(result, 3.0f);
}

TEST(ThreadCommunicatorTest, TimedWorkMeasuresTheCollective) {
  ThreadGroup group(2);
  RunRanks(group, [&](ThreadCommunicator& comm) {
    // Rank 1 comes late, so rank 0's collective runs at least that long.
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<float> data(1000, 1.0f);
    CollectiveOptions timed;
    timed.timed = true;
    std::shared_ptr<Work> work =
        comm.AllReduce(data.data(), data.size(), ReduceOp::kSum, timed);
    // No ASSERT before a collective: every rank must issue the same ones.
    EXPECT_NE(work->started(), nullptr);
    EXPECT_NE(work->finished(), nullptr);
    if (work->started() != nullptr && work->finished() != nullptr) {
      // Waits for the end, as a device event would.
      const double ms = work->finished()->ElapsedMsSince(*work->started());
      EXPECT_TRUE(work->finished()->Query());
      EXPECT_GE(ms, 0.0);
      if (comm.rank() == 0) {
        EXPECT_GE(ms, 20.0);
      }
    }
    work->Wait();
    EXPECT_EQ(data[0], 2.0f);
    std::shared_ptr<Work> untimed = comm.Barrier();
    EXPECT_EQ(untimed->started(), nullptr);
    EXPECT_EQ(untimed->finished(), nullptr);
    untimed->Wait();
  });
}

TEST(ThreadCommunicatorTest, WaitAndWaitOnRethrowTheAbortEveryTime) {
  ThreadGroup group(2);
  group.Abort("stop");
  float x = 0;
  std::shared_ptr<Work> work = group.communicator(0).AllReduce(&x, 1, ReduceOp::kSum);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(work->Wait(), CollectiveAbortedError);
    EXPECT_THROW(work->WaitOn(MainLane(Device::Cpu())), CollectiveAbortedError);
  }
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(ErrorText([&] { work->Wait(); }), "collective aborted: stop");
}

// Destroying the group fails what is still pending rather than hanging on
// a rank that never came.
TEST(ThreadCommunicatorTest, DestroyingTheGroupFailsPendingWork) {
  std::vector<float> data(10, 1.0f);
  std::shared_ptr<Work> pending, queued;
  {
    ThreadGroup group(2);
    ThreadCommunicator& comm = group.communicator(0);
    pending = comm.AllReduce(data.data(), data.size(), ReduceOp::kSum);
    queued = comm.Barrier();
  }
  EXPECT_TRUE(pending->IsCompleted());
  EXPECT_THROW(pending->Wait(), CollectiveAbortedError);
  EXPECT_THROW(queued->Wait(), CollectiveAbortedError);
  // "the ThreadGroup was destroyed" where it had started, else the queue's
  // "ThreadCommunicator(rank 0 of 2) was destroyed with this collective queued".
  EXPECT_NE(ErrorText([&] { pending->Wait(); }).find(" was destroyed"), std::string::npos);
}

TEST(ThreadCommunicatorTest, AbortWakesBlockedRanks) {
  const int n = 3;
  ThreadGroup group(n);
  std::vector<std::string> errors(n);
  std::vector<double> seconds(n);
  RunRanks(group, [&](ThreadCommunicator& comm) {
    if (comm.rank() == 2) {
      // Never arrives; gives up once the others are surely waiting.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.Abort("rank 2 gave up");
      return;
    }
    std::vector<float> data(100, 1.0f);
    errors[comm.rank()] = ErrorText(
        [&] { comm.AllReduce(data.data(), data.size(), ReduceOp::kSum)->Wait(); });
    // A collective started after the abort throws at once.
    const Clock::time_point start = Clock::now();
    EXPECT_EQ(ErrorText([&] { comm.Barrier()->Wait(); }),
              "collective aborted: rank 2 gave up");
    seconds[comm.rank()] =
        std::chrono::duration<double>(Clock::now() - start).count();
  });
  EXPECT_TRUE(group.aborted());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], "collective aborted: rank 2 gave up") << "rank " << r;
    EXPECT_LT(seconds[r], 0.5) << "rank " << r;
  }
}

TEST(ThreadCommunicatorTest, AbortIsPromptAndThrowsTheAbortType) {
  ThreadGroup group(2);
  Clock::time_point aborted_at;
  double waited = 0;
  bool abort_type = false;
  RunRanks(group, [&](ThreadCommunicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      aborted_at = Clock::now();
      group.Abort("stop");
      return;
    }
    try {
      comm.Barrier()->Wait();
    } catch (const CollectiveAbortedError&) {
      abort_type = true;
    }
    waited = std::chrono::duration<double>(Clock::now() - aborted_at).count();
  });
  EXPECT_TRUE(abort_type);
  EXPECT_LT(waited, 0.5);
}

TEST(ThreadCommunicatorTest, TimeoutNamesKindSequenceAndBytes) {
  ThreadGroup group(2);
  group.set_timeout(std::chrono::milliseconds(200));
  std::string error;
  std::string echo;
  RunRanks(group, [&](ThreadCommunicator& comm) {
    comm.Barrier()->Wait();  // #1, both ranks
    if (comm.rank() == 1) {
      // Skips the all-reduce, then arrives late at a barrier.
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      echo = ErrorText([&] { comm.Barrier()->Wait(); });
      return;
    }
    std::vector<float> data(10, 1.0f);
    error = ErrorText(
        [&] { comm.AllReduce(data.data(), data.size(), ReduceOp::kSum)->Wait(); });
  });
  EXPECT_NE(error.find("AllReduce #2 (40 bytes, sum)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("timed out after 200 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("waiting for rank(s) 1"), std::string::npos) << error;
  // The rank that was late finds the group aborted by the timeout.
  EXPECT_EQ(echo.rfind("collective aborted: AllReduce #2", 0), 0u) << echo;
}

TEST(ThreadCommunicatorTest, MismatchedCollectivesThrowOnEveryRank) {
  ThreadGroup group(3);
  std::vector<std::string> errors(3);
  RunRanks(group, [&](ThreadCommunicator& comm) {
    std::vector<float> data(10, 1.0f);
    errors[comm.rank()] = ErrorText([&] {
      if (comm.rank() == 1) {
        comm.AllReduce(data.data(), 11, ReduceOp::kSum)->Wait();  // wrong count
      } else {
        comm.AllReduce(data.data(), 10, ReduceOp::kSum)->Wait();
      }
    });
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("ranks called different collectives: rank 0 "
                             "called AllReduce #1 (40 bytes, sum) but rank 1 "
                             "called AllReduce #1 (44 bytes, sum)"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

// A reduce-scatter that one rank skips times out like any collective,
// named with its size (what each rank receives) and its op.
TEST(ThreadCommunicatorTest, ReduceScatterTimeoutNamesIt) {
  ThreadGroup group(2);
  group.set_timeout(std::chrono::milliseconds(200));
  std::string error;
  RunRanks(group, [&](ThreadCommunicator& comm) {
    if (comm.rank() == 1) return;  // skips it
    std::vector<float> send(20, 1.0f), recv(10);
    error = ErrorText([&] {
      comm.ReduceScatter(send.data(), 10, recv.data(), ReduceOp::kAverage)->Wait();
    });
  });
  EXPECT_NE(error.find("ReduceScatter #1 (40 bytes, average) on ThreadCommunicator rank 0 of 2 "
                       "timed out after 200 ms waiting for rank(s) 1"),
            std::string::npos)
      << error;
}

// Reduce-scatters that differ in their op (or their count, or against
// another collective) fail on every rank, naming both calls.
TEST(ThreadCommunicatorTest, MismatchedReduceScattersThrowOnEveryRank) {
  ThreadGroup group(2);
  std::vector<std::string> errors(2);
  RunRanks(group, [&](ThreadCommunicator& comm) {
    std::vector<float> send(20, 1.0f), recv(10);
    const ReduceOp op = comm.rank() == 1 ? ReduceOp::kAverage : ReduceOp::kSum;
    errors[comm.rank()] =
        ErrorText([&] { comm.ReduceScatter(send.data(), 10, recv.data(), op)->Wait(); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ranks called different collectives: rank 0 called ReduceScatter "
                             "#1 (40 bytes, sum) but rank 1 called ReduceScatter #1 (40 bytes, "
                             "average)"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(ThreadCommunicatorTest, RejectsBadArguments) {
  EXPECT_NE(ErrorText([] { ThreadGroup group(0); }).find("at least 1 rank"),
            std::string::npos);
  ThreadGroup group(1);
  EXPECT_NE(ErrorText([&] { group.communicator(1); }).find("rank 1"),
            std::string::npos);
  float x = 0;
  EXPECT_NE(ErrorText([&] {
              group.communicator(0).Broadcast(&x, 1, 3)->Wait();
            }).find("root 3 is not a rank"),
            std::string::npos);
  EXPECT_NE(ErrorText([&] {
              group.set_timeout(std::chrono::milliseconds(0));
            }).find("timeout"),
            std::string::npos);
}

TEST(ThreadCommunicatorTest, Describe) {
  ThreadGroup group(4);
  EXPECT_EQ(group.communicator(2).Describe(),
            "ThreadCommunicator(rank 2 of 4)");
  EXPECT_EQ(group.communicator(2).size(), 4);
  EXPECT_EQ(group.timeout(), ThreadGroup::kDefaultTimeout);
}

}  // namespace
}  // namespace tandem
