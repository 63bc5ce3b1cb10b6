// Inputs and checks shared by the tests of device communicators
// (nccl_communicator_test, nccl_work_test, nccl_mpi_test): each rank's
// values, which elements of a result differ from a closed form, and the
// device buffers and busy lanes those tests are built from.
//
//   SKIP_UNLESS_GPUS(2);
//   Tensor data = testing::OnDevice(testing::RankValues(rank, n), device);  // rank + i/2
//   comm.AllReduce(data.data(), n, ReduceOp::kSum)->Wait();                 // 2 ranks
//   EXPECT_EQ(testing::Mismatches(testing::FirstN(data, n),
//                                 [](int64_t i) { return 1.f + i; }), "");
#ifndef TANDEM_TESTS_SUPPORT_RANK_VALUES_H_
#define TANDEM_TESTS_SUPPORT_RANK_VALUES_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace testing {

// Rank r's input: r + i * 0.5. Sums and averages over a few ranks of these
// are exact in fp32 for counts below 2^22, so results can be compared with
// closed forms bit for bit.
std::vector<float> RankValues(int rank, int64_t n);

// "" when every got[i] == expected(i); otherwise how many differ, with the
// first three named: "2 wrong: [3] 1.000000 != 2.000000 [9] ...".
std::string Mismatches(const std::vector<float>& got,
                       const std::function<float(int64_t)>& expected);

// Whether both hold the same floats bit for bit.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

// `values` on `device`, with at least one element (-1 when `values` is
// empty), so that a collective of count 0 still has a valid pointer.
Tensor OnDevice(std::vector<float> values, Device device);
// The first n elements of `t`, read on its device's main lane.
std::vector<float> FirstN(const Tensor& t, int64_t n);

// "" when `n` GPUs are visible, else why a test cannot run.
std::string NeedGpus(int n);

// Queues large GEMMs on `lane` (a GPU lane of `device`), so that work
// queued after them is still pending when an unordered reader would run.
// The device's main lane waits for them before the GEMMs' buffers go back
// to the allocator.
void KeepBusy(const Lane& lane, Device device);

}  // namespace testing
}  // namespace tandem

#define SKIP_UNLESS_GPUS(n)                                         \
  do {                                                              \
    const std::string tandem_skip_why = ::tandem::testing::NeedGpus(n); \
    if (!tandem_skip_why.empty()) GTEST_SKIP() << tandem_skip_why;  \
  } while (0)

#endif  // TANDEM_TESTS_SUPPORT_RANK_VALUES_H_
