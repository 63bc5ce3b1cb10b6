// Tests core/cpu/cpu_math_ops.h's threading: each row-wise or element-wise
// op spread over four threads gives the same bits as on one, and each row
// equals the op's definition computed here (as ops_math_test does through
// the backend, on sizes too small to be split).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu/cpu_math_ops.h"
#include "core/cpu/cpu_thread_pool.h"
#include "tests/support/intra_op_runs.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

// Several pieces of rows (a piece is 32768 elements).
constexpr int64_t kRows = 700, kCols = 333, kSize = kRows * kCols;

using testing_support::OnOneAndFour;
using testing_support::RandomNormals;

TEST(CpuMathOpsTest, SoftmaxRowsAreTheirDefinitionOnAnyThreadCount) {
  const std::vector<float> x = RandomNormals(kSize, 1);
  const auto y = OnOneAndFour("Softmax", [&](const IntraOp& intra) {
    std::vector<float> out(kSize);
    Softmax(intra, x.data(), out.data(), kRows, kCols);
    return out;
  });
  for (int64_t r = 0; r < kRows; r += 37) {
    double sum = 0.0;
    for (int64_t c = 0; c < kCols; ++c) sum += y[r * kCols + c];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    const int64_t c = r % kCols;
    double denom = 0.0;
    for (int64_t k = 0; k < kCols; ++k) denom += std::exp(double(x[r * kCols + k]));
    EXPECT_NEAR(y[r * kCols + c], std::exp(double(x[r * kCols + c])) / denom, 1e-6);
  }
}

TEST(CpuMathOpsTest, RowReductionsAndBroadcastsAreTheSameOnAnyThreadCount) {
  const std::vector<float> x = RandomNormals(kSize, 2), v = RandomNormals(kRows, 3);
  for (RowReduction op : {RowReduction::kSum, RowReduction::kMean, RowReduction::kMax,
                          RowReduction::kVariance}) {
    const auto out = OnOneAndFour("RowReduce", [&](const IntraOp& intra) {
      std::vector<float> o(kRows);
      RowReduce(intra, op, x.data(), kRows, kCols, o.data());
      return o;
    });
    if (op == RowReduction::kSum) {
      for (int64_t r = 0; r < kRows; r += 53) {
        float s = 0.f;  // in column order, as the header says
        for (int64_t c = 0; c < kCols; ++c) s += x[r * kCols + c];
        ASSERT_EQ(out[r], s) << "row " << r;
      }
    }
  }
  const auto sub = OnOneAndFour("BroadcastBinary", [&](const IntraOp& intra) {
    std::vector<float> o(kSize);
    BroadcastBinary(intra, BinaryOp::kSub, Broadcast::kColumn, x.data(), v.data(), o.data(),
                    kRows, kCols);
    return o;
  });
  for (int64_t i = 0; i < kSize; i += 101) ASSERT_EQ(sub[i], x[i] - v[i / kCols]) << i;
  // One long row (a gradient scaled by one factor) is split over its columns.
  for (Broadcast how : {Broadcast::kColumn, Broadcast::kRow}) {
    const auto row = OnOneAndFour("BroadcastBinary of one row", [&](const IntraOp& intra) {
      std::vector<float> o(kSize);
      BroadcastBinary(intra, BinaryOp::kMul, how, x.data(), how == Broadcast::kRow ? x.data()
                                                                                   : v.data(),
                      o.data(), 1, kSize);
      return o;
    });
    for (int64_t i = 0; i < kSize; i += 101) {
      ASSERT_EQ(row[i], x[i] * (how == Broadcast::kRow ? x[i] : v[0])) << i;
    }
  }
  const auto exps = OnOneAndFour("Unary", [&](const IntraOp& intra) {
    std::vector<float> o(kSize);
    Unary(intra, UnaryOp::kExp, x.data(), o.data(), kSize);
    return o;
  });
  for (int64_t i = 0; i < kSize; i += 101) ASSERT_EQ(exps[i], std::exp(x[i])) << i;
}

}  // namespace
}  // namespace math
}  // namespace cpu
}  // namespace tandem
