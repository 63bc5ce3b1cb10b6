// For tests of the CPU backend's threaded loops (core/cpu/cpu_math.h,
// cpu_math_ops.h): random inputs, and OnOneAndFour, which runs an op on one
// thread and on four and expects the same bits.
//
//   const auto y = OnOneAndFour("Softmax", [&](const cpu::IntraOp& intra) {
//     std::vector<float> out(n);
//     cpu::math::Softmax(intra, x.data(), out.data(), rows, cols);
//     return out;
//   });
#ifndef TANDEM_TESTS_SUPPORT_INTRA_OP_RUNS_H_
#define TANDEM_TESTS_SUPPORT_INTRA_OP_RUNS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace testing_support {

// n samples of N(0, 1), the same for the same seed.
inline std::vector<float> RandomNormals(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Runs `op` (an IntraOp -> std::vector<float>) on 1 thread and on 4 of a
// pool; expects the two results to be the same bits; returns the first.
template <typename Op>
std::vector<float> OnOneAndFour(const char* what, Op&& op) {
  cpu::ThreadPool pool;
  const std::vector<float> one = op(cpu::IntraOp{&pool, 1});
  const std::vector<float> four = op(cpu::IntraOp{&pool, 4});
  EXPECT_EQ(one.size(), four.size()) << what;
  EXPECT_TRUE(one.size() == four.size() &&
              std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0)
      << what << ": 1 and 4 threads differ";
  return one;
}

}  // namespace testing_support
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_INTRA_OP_RUNS_H_
