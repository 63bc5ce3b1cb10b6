// The math ops of core/ops_math.h against references computed on the host,
// one test body for CPU and CUDA (CUDA cases skip, saying why, where no GPU
// is visible); CUDA-vs-CPU parity is in ops_math_parity_test.cc.
//
// References and tolerances. Inputs are rounded to bfloat16 first where the
// op runs in bfloat16, so both dtypes see the same numbers.
// - Ops of one correctly rounded float32 operation per element (add, sub,
//   mul, divide, sqrt, reciprocal; rsqrt is two) are compared bit for bit
//   with the same float32 operation on the host, rounded once to bfloat16
//   for bfloat16 outputs; so are the ops that move elements (transpose,
//   gather) and ScatterAddRows, whose order of float32 additions is part of
//   its contract.
// - exp and log (each platform's expf/logf) are compared with double: float32
//   within relative kF32Rel = 1e-6 (a few units in the last place);
//   bfloat16 outputs add one rounding, 2^-8.
// - Sums of n float32 terms are within n 2^-24 sum|x| of the double sum (the
//   bound of recursive summation; a GPU block's tree only shortens the
//   chains); the variance, two float32 passes over at most 1000 terms,
//   within relative 1e-4; softmax within relative (cols + 4) 2^-24 (its sum,
//   expf and the division).
#include "core/ops_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kBf16 = DType::kBFloat16;
constexpr double kF32Rel = 1e-6;
constexpr double kBf16Rel = 1.0 / 256 + kF32Rel;
constexpr double kUnitRoundoff = 1.0 / (1 << 24);  // 2^-24

double RelFor(DType dtype) { return dtype == kBf16 ? kBf16Rel : kF32Rel; }

// What storing a float32 result in `dtype` keeps.
float Store(float value, DType dtype) {
  return dtype == kBf16 ? RoundToBFloat16(value) : value;
}

// |actual - expected| <= rel |expected| + abs, element by element; infinities
// and NaN must match exactly. One failure names the first bad element and
// how many there are.
void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected,
                 double rel, double abs, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected[i], a = actual[i];
    const bool ok = std::isnan(e)   ? std::isnan(a)
                    : std::isinf(e) ? a == e
                                    : std::fabs(a - e) <= rel * std::fabs(e) + abs;
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance, the first " << first
                    << ": " << (first >= 0 ? actual[first] : 0.f) << ", expected "
                    << (first >= 0 ? expected[first] : 0.0);
}

// The same bits (NaN equal to NaN of any payload).
void ExpectSameFloats(const std::vector<float>& actual, const std::vector<float>& expected,
                      const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    const bool ok = (std::isnan(expected[i]) && std::isnan(actual[i])) ||
                    std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0;
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements differ in their bits, the first "
                    << first << ": " << (first >= 0 ? actual[first] : 0.f) << ", expected "
                    << (first >= 0 ? expected[first] : 0.f);
}

using testing::ExpectErrorContains;

using testing::DeviceTest;
class OpsMathTest : public DeviceTest {
 protected:
  Tensor Make(const std::vector<float>& values, const Shape& shape, DType dtype = kF32) {
    return Tensor::FromVector(values, shape, device(), dtype);
  }
  // n values uniform in [low, high), representable in `dtype`.
  std::vector<float> Uniform(int64_t n, float low, float high, DType dtype) {
    std::vector<float> v(n);
    for (float& x : v) x = Store(rng_.Uniform(low, high), dtype);
    return v;
  }
  std::vector<float> Normal(int64_t n, float mean, float stddev, DType dtype) {
    std::vector<float> v(n);
    for (float& x : v) x = Store(rng_.Normal(mean, stddev), dtype);
    return v;
  }
  Rng rng_{19};
};

// Sizes that are not a multiple of the GPU's 8-element vectors or of a
// 32-wide tile.
constexpr int64_t kRows = 37, kCols = 29, kN = kRows * kCols;

using TensorOp = std::function<void(const Tensor&, Tensor&)>;

// Runs `op` out of place and in place and checks both against `expected`.
template <typename Check>
void RunBothWays(const TensorOp& op, const Tensor& x, const Check& check) {
  Tensor out = Tensor::Empty(x.shape(), x.device(), x.dtype());
  op(x, out);
  check(out.ToVector(), "out of place");
  Tensor in_place = x.Clone();
  op(in_place, in_place);
  check(in_place.ToVector(), "in place");
}

TEST_P(OpsMathTest, ExpAndLogMatchDouble) {
  const TensorOp exp_op = [](const Tensor& x, Tensor& o) { ops::Exp(x, o); };
  const TensorOp log_op = [](const Tensor& x, Tensor& o) { ops::Log(x, o); };
  for (DType dtype : {kF32, kBf16}) {
    const std::vector<float> e = Uniform(kN, -20.f, 20.f, dtype);
    const std::vector<float> l = Uniform(kN, 1e-3f, 1e3f, dtype);
    std::vector<double> exp_ref(kN), log_ref(kN);
    for (int64_t i = 0; i < kN; ++i) {
      exp_ref[i] = std::exp(double(e[i]));
      log_ref[i] = std::log(double(l[i]));
    }
    const std::string name = DTypeName(dtype);
    RunBothWays(exp_op, Make(e, {kRows, kCols}, dtype), [&](auto got, const char* how) {
      ExpectClose(got, exp_ref, RelFor(dtype), 0, "Exp " + name + " " + how);
    });
    // log near 1 is near 0: an absolute float32 term for the cancellation.
    RunBothWays(log_op, Make(l, {kN}, dtype), [&](auto got, const char* how) {
      ExpectClose(got, log_ref, RelFor(dtype), 1e-6, "Log " + name + " " + how);
    });
  }
  Tensor special = Make({0.f, -1.f, 100.f, -200.f, INFINITY}, {5});
  Tensor out = Tensor::Empty({5}, device());
  ops::Log(special, out);
  ExpectClose(out.ToVector(), {-INFINITY, NAN, std::log(100.0), NAN, INFINITY}, kF32Rel, 0,
              "Log of special values");
  ops::Exp(special, out);
  ExpectClose(out.ToVector(), {1, std::exp(-1.0), INFINITY, 0, INFINITY}, kF32Rel, 0,
              "Exp of special values");
}

// sqrt, 1 / sqrt and 1 / x: correctly rounded divisions and square roots,
// so the host's float32 operations give the same bits.
TEST_P(OpsMathTest, SqrtRsqrtReciprocalAreCorrectlyRounded) {
  struct Case {
    const char* name;
    TensorOp op;
    float (*host)(float);
    float low, high;
  };
  const Case cases[] = {
      {"Sqrt", [](const Tensor& x, Tensor& o) { ops::Sqrt(x, o); },
       [](float x) { return std::sqrt(x); }, 0.f, 1e4f},
      {"Rsqrt", [](const Tensor& x, Tensor& o) { ops::Rsqrt(x, o); },
       [](float x) { return 1.f / std::sqrt(x); }, 1e-4f, 1e4f},
      {"Reciprocal", [](const Tensor& x, Tensor& o) { ops::Reciprocal(x, o); },
       [](float x) { return 1.f / x; }, -1e3f, 1e3f},
  };
  for (const Case& c : cases) {
    for (DType dtype : {kF32, kBf16}) {
      const std::vector<float> x = Uniform(kN, c.low, c.high, dtype);
      std::vector<float> expected(kN);
      for (int64_t i = 0; i < kN; ++i) expected[i] = Store(c.host(x[i]), dtype);
      const std::string what = std::string(c.name) + " " + DTypeName(dtype);
      RunBothWays(c.op, Make(x, {kRows, kCols}, dtype), [&](auto got, const char* how) {
        ExpectSameFloats(got, expected, what + " " + how);
      });
    }
  }
  Tensor special = Make({0.f, -0.f, -1.f, 4.f}, {4});
  Tensor out = Tensor::Empty({4}, device());
  ops::Sqrt(special, out);
  ExpectSameFloats(out.ToVector(), {0.f, -0.f, NAN, 2.f}, "Sqrt of special values");
  ops::Rsqrt(special, out);
  ExpectSameFloats(out.ToVector(), {INFINITY, -INFINITY, NAN, 0.5f}, "Rsqrt of special values");
  ops::Reciprocal(special, out);
  ExpectSameFloats(out.ToVector(), {INFINITY, -INFINITY, -1.f, 0.25f},
                   "Reciprocal of special values");
}

TEST_P(OpsMathTest, DivAndScalarOps) {
  Tensor a = Make({1, -6, 0, 5}, {4}), b = Make({4, 3, 0, 0}, {4});
  Tensor out = Tensor::Empty({4}, device());
  ops::Div(a, b, out);
  ExpectSameFloats(out.ToVector(), {0.25f, -2.f, NAN, INFINITY}, "Div by hand");
  ops::AddScalar(a, 0.5f, out);
  ExpectSameFloats(out.ToVector(), {1.5f, -5.5f, 0.5f, 5.5f}, "AddScalar by hand");
  ops::MulScalar(a, -2.f, a);
  ExpectSameFloats(a.ToVector(), {-2.f, 12.f, -0.f, -10.f}, "MulScalar in place by hand");
  for (DType dtype : {kF32, kBf16}) {
    const std::vector<float> x = Normal(kN, 0.f, 3.f, dtype), y = Normal(kN, 0.f, 3.f, dtype);
    const float s = 0.3f;
    std::vector<float> quotient(kN), sum(kN), product(kN);
    for (int64_t i = 0; i < kN; ++i) {
      quotient[i] = Store(x[i] / y[i], dtype);
      sum[i] = Store(x[i] + s, dtype);
      product[i] = Store(x[i] * s, dtype);
    }
    const std::string name = DTypeName(dtype);
    Tensor tx = Make(x, {kN}, dtype), ty = Make(y, {kN}, dtype);
    Tensor t = Tensor::Empty({kN}, device(), dtype);
    ops::Div(tx, ty, t);
    ExpectSameFloats(t.ToVector(), quotient, "Div " + name);
    Tensor a_in_place = tx.Clone(), b_in_place = ty.Clone();
    ops::Div(a_in_place, ty, a_in_place);
    ops::Div(tx, b_in_place, b_in_place);
    ExpectSameFloats(a_in_place.ToVector(), quotient, "Div into a " + name);
    ExpectSameFloats(b_in_place.ToVector(), quotient, "Div into b " + name);
    RunBothWays([&](const Tensor& in, Tensor& o) { ops::AddScalar(in, s, o); }, tx,
                [&](auto got, const char* how) {
                  ExpectSameFloats(got, sum, "AddScalar " + name + " " + how);
                });
    RunBothWays([&](const Tensor& in, Tensor& o) { ops::MulScalar(in, s, o); }, tx,
                [&](auto got, const char* how) {
                  ExpectSameFloats(got, product, "MulScalar " + name + " " + how);
                });
  }
}

TEST_P(OpsMathTest, BroadcastsByHand) {
  Tensor x = Make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = Make({10, 20, 30}, {3}), column = Make({100, 200}, {2});
  Tensor out = Tensor::Empty({2, 3}, device());
  ops::BroadcastAdd(x, row, Broadcast::kRow, out);
  ExpectSameFloats(out.ToVector(), {11, 22, 33, 14, 25, 36}, "BroadcastAdd row");
  ops::BroadcastAdd(x, column, Broadcast::kColumn, out);
  ExpectSameFloats(out.ToVector(), {101, 102, 103, 204, 205, 206}, "BroadcastAdd column");
  ops::BroadcastSub(x, column, Broadcast::kColumn, out);
  ExpectSameFloats(out.ToVector(), {-99, -98, -97, -196, -195, -194}, "BroadcastSub column");
  ops::BroadcastMul(x, row, Broadcast::kRow, out);
  ExpectSameFloats(out.ToVector(), {10, 40, 90, 40, 100, 180}, "BroadcastMul row");
  ops::BroadcastMul(x, column, Broadcast::kColumn, out);
  ExpectSameFloats(out.ToVector(), {100, 200, 300, 800, 1000, 1200}, "BroadcastMul column");
  ops::BroadcastDiv(x, row, Broadcast::kRow, x);
  ExpectSameFloats(x.ToVector(), {0.1f, 0.1f, 0.1f, 0.4f, 0.25f, 0.2f},
                   "BroadcastDiv row in place");
}

// Host float32 reference of a broadcast: the same one operation per element.
std::vector<float> HostBroadcast(BinaryOp op, Broadcast how, const std::vector<float>& x,
                                 const std::vector<float>& v, int64_t rows, int64_t cols,
                                 DType dtype) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float a = x[r * cols + c], b = v[how == Broadcast::kRow ? c : r];
      float y = 0.f;
      switch (op) {
        case BinaryOp::kAdd: y = a + b; break;
        case BinaryOp::kSub: y = a - b; break;
        case BinaryOp::kMul: y = a * b; break;
        case BinaryOp::kDiv: y = a / b; break;
      }
      out[r * cols + c] = Store(y, dtype);
    }
  }
  return out;
}

using BroadcastFn = void (*)(const Tensor&, const Tensor&, Broadcast, Tensor&);
using MakeFn = std::function<Tensor(const std::vector<float>&, const Shape&, DType)>;
using ValuesFn = std::function<std::vector<float>(int64_t, DType)>;

// Both layouts, the first `op_count` of add, mul, sub and div, both dtypes,
// out of place and in place, at [rows, cols] (a GPU grid strides more than
// once past 2^20 elements).
void CheckBroadcasts(int64_t rows, int64_t cols, int op_count, const MakeFn& make,
                     const ValuesFn& values) {
  const struct {
    BinaryOp op;
    BroadcastFn fn;
    const char* name;
  } kOps[] = {
      {BinaryOp::kAdd, [](const Tensor& x, const Tensor& v, Broadcast h, Tensor& o) {
         ops::BroadcastAdd(x, v, h, o); }, "BroadcastAdd"},
      {BinaryOp::kMul, [](const Tensor& x, const Tensor& v, Broadcast h, Tensor& o) {
         ops::BroadcastMul(x, v, h, o); }, "BroadcastMul"},
      {BinaryOp::kSub, [](const Tensor& x, const Tensor& v, Broadcast h, Tensor& o) {
         ops::BroadcastSub(x, v, h, o); }, "BroadcastSub"},
      {BinaryOp::kDiv, [](const Tensor& x, const Tensor& v, Broadcast h, Tensor& o) {
         ops::BroadcastDiv(x, v, h, o); }, "BroadcastDiv"},
  };
  for (DType dtype : {kF32, kBf16}) {
    const std::vector<float> x = values(rows * cols, dtype);
    const Tensor tx = make(x, {rows, cols}, dtype);
    for (Broadcast how : {Broadcast::kRow, Broadcast::kColumn}) {
      const int64_t length = how == Broadcast::kRow ? cols : rows;
      const std::vector<float> v = values(length, dtype);
      const Tensor tv = make(v, {length}, dtype);
      for (int k = 0; k < op_count; ++k) {
        const auto& o = kOps[k];
        const std::vector<float> expected = HostBroadcast(o.op, how, x, v, rows, cols, dtype);
        const std::string what = std::string(o.name) +
                                 (how == Broadcast::kRow ? " row " : " column ") +
                                 DTypeName(dtype) + " [" + std::to_string(rows) + ", " +
                                 std::to_string(cols) + "]";
        Tensor out = Tensor::Empty({rows, cols}, tx.device(), dtype);
        o.fn(tx, tv, how, out);
        ExpectSameFloats(out.ToVector(), expected, what);
        Tensor in_place = tx.Clone();
        o.fn(in_place, tv, how, in_place);
        ExpectSameFloats(in_place.ToVector(), expected, what + " in place");
      }
    }
  }
}

TEST_P(OpsMathTest, BroadcastsMatchHostFloat32) {
  const auto make = [&](const std::vector<float>& v, const Shape& s, DType d) {
    return Make(v, s, d);
  };
  const auto values = [&](int64_t n, DType d) { return Normal(n, 0.f, 2.f, d); };
  CheckBroadcasts(kRows, kCols, 4, make, values);
  CheckBroadcasts(1031, 2039, 2, make, values);  // 2.1M elements: the grid strides
}

// Hand values: sum, mean, max and population variance.
TEST_P(OpsMathTest, RowReductionsByHand) {
  Tensor x = Make({1, 2, 3, 4, -2, -2, -2, -2, 0, NAN, 5, 1}, {3, 4});
  Tensor out = Tensor::Empty({3}, device());
  ops::RowSum(x, out);
  ExpectClose(out.ToVector(), {10, -8, NAN}, 0, 0, "RowSum");
  ops::RowMean(x, out);
  ExpectClose(out.ToVector(), {2.5, -2, NAN}, 0, 0, "RowMean");
  ops::RowMax(x, out);
  ExpectClose(out.ToVector(), {4, -2, NAN}, 0, 0, "RowMax (NaN shows)");
  ops::RowVariance(x, out);
  ExpectClose(out.ToVector(), {1.25, 0, NAN}, 0, 0, "RowVariance (population)");
  Tensor empty_rows = Tensor::Zeros({3, 0}, device());
  Tensor sums = Tensor::Full({3}, 7.f, device());
  ops::RowSum(empty_rows, sums);
  ExpectClose(sums.ToVector(), {0, 0, 0}, 0, 0, "RowSum of empty rows");
  ExpectErrorContains([&] { ops::RowMean(empty_rows, sums); },
                      "RowMean of rows with no columns: x is [3, 0]");
}

// Double references for x [rows, cols] (inputs as stored).
struct RowStats {
  std::vector<double> sum, mean, max, variance, abs_sum;
};
RowStats HostRowStats(const std::vector<float>& x, int64_t rows, int64_t cols) {
  RowStats s;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, abs_sum = 0, max = -INFINITY, squares = 0;
    for (int64_t c = 0; c < cols; ++c) {
      sum += x[r * cols + c];
      abs_sum += std::fabs(x[r * cols + c]);
      max = std::max(max, double(x[r * cols + c]));
    }
    const double mean = sum / cols;
    for (int64_t c = 0; c < cols; ++c) {
      squares += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    }
    s.sum.push_back(sum);
    s.mean.push_back(mean);
    s.max.push_back(max);
    s.variance.push_back(squares / cols);
    s.abs_sum.push_back(abs_sum);
  }
  return s;
}

TEST_P(OpsMathTest, RowReductionsMatchDoubleInEveryDTypePair) {
  // 1000 columns: several strides of a 256-thread block. A mean of 1000 with
  // a spread of 1: E[x^2] - mean^2 would lose every digit of the variance.
  for (const auto& [rows, cols, mean] :
       {std::tuple<int64_t, int64_t, float>{kRows, kCols, 0.f}, {40, 1000, 1000.f}}) {
    for (DType in : {kF32, kBf16}) {
      const std::vector<float> x = Normal(rows * cols, mean, 1.f, in);
      const RowStats ref = HostRowStats(x, rows, cols);
      const Tensor tx = Make(x, {rows, cols}, in);
      for (DType out_dtype : {kF32, kBf16}) {
        const std::string what = std::string(" x ") + DTypeName(in) + " out " +
                                 DTypeName(out_dtype) + " cols " + std::to_string(cols);
        const double rel = out_dtype == kBf16 ? kBf16Rel : 0.0;
        Tensor out = Tensor::Empty({rows}, device(), out_dtype);
        const auto sum_abs = [&](size_t r, double scale) {
          return cols * kUnitRoundoff * ref.abs_sum[r] * scale;
        };
        ops::RowSum(tx, out);
        std::vector<float> got = out.ToVector();
        for (int64_t r = 0; r < rows; ++r) {
          ExpectClose({got[r]}, {ref.sum[r]}, rel, sum_abs(r, 1), "RowSum" + what);
        }
        ops::RowMean(tx, out);
        got = out.ToVector();
        for (int64_t r = 0; r < rows; ++r) {
          ExpectClose({got[r]}, {ref.mean[r]}, rel + kUnitRoundoff, sum_abs(r, 1.0 / cols),
                      "RowMean" + what);
        }
        ops::RowMax(tx, out);
        ExpectClose(out.ToVector(), ref.max, rel, 0, "RowMax" + what);
        ops::RowVariance(tx, out);
        ExpectClose(out.ToVector(), ref.variance, rel + 1e-4, 0, "RowVariance" + what);
      }
    }
  }
}

std::vector<double> HostSoftmax(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) max = std::max(max, double(x[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - max);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(x[r * cols + c] - max) / sum;
  }
  return out;
}

TEST_P(OpsMathTest, SoftmaxMatchesDouble) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{kRows, kCols}, {9, 3000}}) {
    for (DType dtype : {kF32, kBf16}) {
      const std::vector<float> x = Normal(rows * cols, 0.f, 3.f, dtype);
      const std::vector<double> ref = HostSoftmax(x, rows, cols);
      const double rel = (cols + 4) * kUnitRoundoff + (dtype == kBf16 ? 1.0 / 256 : 0.0);
      const std::string what = std::string("Softmax ") + DTypeName(dtype) + " cols " +
                               std::to_string(cols);
      RunBothWays([](const Tensor& in, Tensor& o) { ops::Softmax(in, o); },
                  Make(x, {rows, cols}, dtype), [&](auto got, const char* how) {
                    ExpectClose(got, ref, rel, 0, what + " " + how);
                  });
    }
  }
}

// Inputs whose exp overflows (or underflows) float32: only x - max is
// exponentiated. -inf entries are masks; a row without a finite maximum is NaN.
TEST_P(OpsMathTest, SoftmaxIsStableForLargeInputs) {
  const std::vector<float> x = {1000, 1001, 1002,   -1000, -1001, -1002,
                                3e38f, -3e38f, 3e38f, 0, -INFINITY, 0,
                                -INFINITY, -INFINITY, -INFINITY};
  Tensor out = Tensor::Empty({5, 3}, device());
  ops::Softmax(Make(x, {5, 3}), out);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  ExpectClose(out.ToVector(),
              {e2 / z, e1 / z, 1 / z, 1 / z, e1 / z, e2 / z, 0.5, 0, 0.5, 0.5, 0, 0.5, NAN, NAN,
               NAN},
              16 * kUnitRoundoff, 0, "Softmax of large inputs");
}

TEST_P(OpsMathTest, TransposeIsExact) {
  for (const auto& [rows, cols] :
       {std::pair<int64_t, int64_t>{67, 131}, {1, 5}, {2100000, 2}}) {  // 2.1M rows: grid strides
    for (DType dtype : {kF32, kBf16}) {
      const std::vector<float> x = Normal(rows * cols, 0.f, 1.f, dtype);
      std::vector<float> expected(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) expected[c * rows + r] = x[r * cols + c];
      }
      Tensor out = Tensor::Empty({cols, rows}, device(), dtype);
      ops::Transpose(Make(x, {rows, cols}, dtype), out);
      ExpectSameFloats(out.ToVector(), expected,
                       std::string("Transpose ") + DTypeName(dtype) + " [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "]");
    }
  }
}

TEST_P(OpsMathTest, GatherRowsCopiesRowsWithRepeats) {
  Tensor table = Make({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor out = Tensor::Empty({4, 2}, device());
  ops::GatherRows(table, Make({2, 0, 2, 1}, {4}), out);
  ExpectSameFloats(out.ToVector(), {20, 21, 0, 1, 20, 21, 10, 11}, "GatherRows by hand");
  // 70000 rows: more than a GPU grid's 65535 blocks, so the grid strides.
  const int64_t vocab = 1000, n = 70000, cols = 5;
  for (DType dtype : {kF32, kBf16}) {
    const std::vector<float> values = Normal(vocab * cols, 0.f, 1.f, dtype);
    std::vector<float> indices(n), expected(n * cols);
    for (int64_t i = 0; i < n; ++i) {
      indices[i] = static_cast<float>(rng_.UniformInt(vocab));
      for (int64_t c = 0; c < cols; ++c) {
        expected[i * cols + c] = values[static_cast<int64_t>(indices[i]) * cols + c];
      }
    }
    Tensor big = Tensor::Empty({n, cols}, device(), dtype);
    ops::GatherRows(Make(values, {vocab, cols}, dtype), Make(indices, {n}), big);
    ExpectSameFloats(big.ToVector(), expected, std::string("GatherRows ") + DTypeName(dtype));
  }
}

// The CPU refuses a bad index before writing; a GPU fills that row with NaN.
TEST_P(OpsMathTest, GatherRowsBadIndex) {
  Tensor table = Make({0, 1, 10, 11, 20, 21}, {3, 2});
  for (float bad : {1.5f, -1.f, 3.f, NAN}) {
    Tensor out = Tensor::Full({2, 2}, 7.f, device());
    Tensor indices = Make({1, bad}, {2});
    if (device().is_cpu()) {
      std::ostringstream text;
      text << "GatherRows: index " << bad
           << " at position 1 is not a row of the table (whole numbers in [0, 3))";
      ExpectErrorContains([&] { ops::GatherRows(table, indices, out); }, text.str());
      ExpectSameFloats(out.ToVector(), {7, 7, 7, 7}, "out after a refused GatherRows");
    } else {
      ops::GatherRows(table, indices, out);
      ExpectSameFloats(out.ToVector(), {10, 11, NAN, NAN}, "GatherRows with a bad index");
    }
  }
}

// The contract's order: each touched row starts from its float32 value and
// adds src rows in the order of the positions, then rounds once.
std::vector<float> HostScatterAdd(std::vector<float> table, DType table_dtype,
                                  const std::vector<float>& src, const std::vector<float>& indices,
                                  int64_t table_rows, int64_t cols) {
  for (size_t i = 0; i < indices.size(); ++i) {
    const float index = indices[i];
    if (!(index >= 0 && index < table_rows && std::floor(index) == index)) continue;
    for (int64_t c = 0; c < cols; ++c) {
      table[static_cast<int64_t>(index) * cols + c] += src[i * cols + c];
    }
  }
  for (float& v : table) v = Store(v, table_dtype);
  return table;
}

TEST_P(OpsMathTest, ScatterAddRowsByHand) {
  Tensor table = Make({1, 1, 2, 2, 3, 3}, {3, 2});
  Tensor src = Make({10, 20, 30, 40, 50, 60, 70, 80}, {4, 2});
  ops::ScatterAddRows(src, Make({2, 0, 2, 2}, {4}), table);
  ExpectSameFloats(table.ToVector(), {31, 41, 2, 2, 3 + 10 + 50 + 70, 3 + 20 + 60 + 80},
                   "ScatterAddRows with repeated indices");
}

// Heavily repeated indices (3000 positions into 50 rows), more columns than
// a block's 256 threads, every dtype pair: the same bits as the host's
// float32 sums in the contract's order, and the same bits on a rerun.
TEST_P(OpsMathTest, ScatterAddRowsIsDeterministic) {
  const int64_t n = 3000, table_rows = 50, cols = 300;
  std::vector<float> indices(n);
  for (float& i : indices) i = static_cast<float>(rng_.UniformInt(table_rows));
  for (DType src_dtype : {kF32, kBf16}) {
    for (DType table_dtype : {kF32, kBf16}) {
      const std::vector<float> src = Normal(n * cols, 0.f, 1.f, src_dtype);
      const std::vector<float> start = Normal(table_rows * cols, 0.f, 1.f, table_dtype);
      const std::vector<float> expected =
          HostScatterAdd(start, table_dtype, src, indices, table_rows, cols);
      const std::string what = std::string("ScatterAddRows src ") + DTypeName(src_dtype) +
                               " table " + DTypeName(table_dtype);
      const Tensor tsrc = Make(src, {n, cols}, src_dtype), tindices = Make(indices, {n});
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Tensor table = Make(start, {table_rows, cols}, table_dtype);
        ops::ScatterAddRows(tsrc, tindices, table);
        const std::vector<float> got = table.ToVector();
        ExpectSameFloats(got, expected, what + " run " + std::to_string(run));
        if (run == 0) first = got;
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
            << what << ": a rerun gave other bits";
      }
    }
  }
}

// 70000 positions into 1000 rows: the GPU grid strides over positions.
TEST_P(OpsMathTest, ScatterAddRowsManyPositions) {
  const int64_t n = 70000, table_rows = 1000, cols = 3;
  std::vector<float> indices(n);
  for (float& i : indices) i = static_cast<float>(rng_.UniformInt(table_rows));
  const std::vector<float> src = Normal(n * cols, 0.f, 1.f, kF32);
  Tensor table = Tensor::Zeros({table_rows, cols}, device());
  ops::ScatterAddRows(Make(src, {n, cols}), Make(indices, {n}), table);
  ExpectSameFloats(table.ToVector(),
                   HostScatterAdd(std::vector<float>(table_rows * cols, 0.f), kF32, src, indices,
                                  table_rows, cols),
                   "ScatterAddRows of 70000 positions");
}

// The CPU refuses a bad index before writing; a GPU skips its position.
TEST_P(OpsMathTest, ScatterAddRowsBadIndex) {
  Tensor src = Make({1, 2, 3, 4, 5, 6}, {3, 2});
  for (float bad : {0.5f, -1.f, 2.f, NAN}) {
    Tensor table = Make({10, 20, 30, 40}, {2, 2});
    Tensor indices = Make({1, bad, 1}, {3});
    if (device().is_cpu()) {
      std::ostringstream text;
      text << "ScatterAddRows: index " << bad
           << " at position 1 is not a row of the table (whole numbers in [0, 2))";
      ExpectErrorContains([&] { ops::ScatterAddRows(src, indices, table); }, text.str());
      ExpectSameFloats(table.ToVector(), {10, 20, 30, 40}, "table after a refused scatter");
    } else {
      ops::ScatterAddRows(src, indices, table);
      ExpectSameFloats(table.ToVector(), {10, 20, 36, 48}, "ScatterAddRows skipping a bad index");
    }
  }
}

TEST_P(OpsMathTest, ErrorsNameTheOpOperandsShapesAndDTypes) {
  Tensor x = Tensor::Zeros({2, 3}, device()), x16 = Tensor::Zeros({2, 3}, device(), kBf16);
  Tensor out = Tensor::Zeros({2, 3}, device()), three = Tensor::Zeros({3}, device());
  Tensor two = Tensor::Zeros({2}, device());
  ExpectErrorContains(
      [&] { ops::Exp(x, x16); },
      "Exp: x is float32 [2, 3] but out is bfloat16 [2, 3]: they must share a dtype");
  ExpectErrorContains([&] { ops::Sqrt(x, three); }, "Sqrt: x [2, 3] and out [3] differ in size");
  ExpectErrorContains([&] { ops::Div(x, x16, out); },
                      "Div: a is float32 [2, 3] but b is bfloat16 [2, 3]: they must share a dtype");
  ExpectErrorContains([&] { ops::AddScalar(x, 1.f, x16); },
                      "AddScalar: x is float32 [2, 3] but out is bfloat16 [2, 3]");
  ExpectErrorContains([&] { ops::BroadcastAdd(x, three, Broadcast::kColumn, out); },
                      "BroadcastAdd: v [3] does not match the 2 rows of x [2, 3] "
                      "(Broadcast::kColumn: v is [rows])");
  ExpectErrorContains([&] { ops::BroadcastMul(x, two, Broadcast::kRow, out); },
                      "BroadcastMul: v [2] does not match the 3 columns of x [2, 3]");
  ExpectErrorContains([&] { ops::BroadcastMul(x, Tensor::Zeros({3}, device(), kBf16),
                                              Broadcast::kRow, out); },
                      "BroadcastMul: x is float32 [2, 3] but v is bfloat16 [3]");
  ExpectErrorContains([&] { ops::BroadcastAdd(three, three, Broadcast::kRow, out); },
                      "BroadcastAdd: x must be 2-D, got shape [3]");
  ExpectErrorContains([&] { ops::RowSum(x, three); }, "RowSum: out [3] for the 2 rows of x [2, 3]");
  ExpectErrorContains([&] { ops::Softmax(x, x16); },
                      "Softmax: x is float32 [2, 3] but out is bfloat16 [2, 3]");
  ExpectErrorContains([&] { ops::Transpose(x, out); },
                      "Transpose: out is [2, 3] but x [2, 3] transposes to [3, 2]");
  ExpectErrorContains([&] { ops::GatherRows(x, Tensor::Zeros({2}, device(), kBf16), out); },
                      "GatherRows: indices are bfloat16 [2], expected float32");
  Tensor out4 = Tensor::Zeros({4, 3}, device());
  ExpectErrorContains([&] { ops::GatherRows(x, two, out4); },
                      "GatherRows: 2 indices [2] for 4 rows of out [4, 3]");
  ExpectErrorContains([&] { ops::GatherRows(x, two, x16); },
                      "GatherRows: table is float32 [2, 3] but out is bfloat16 [2, 3]");
  ExpectErrorContains([&] { ops::ScatterAddRows(Tensor::Zeros({2, 4}, device()), two, x); },
                      "ScatterAddRows: src [2, 4] has 4 columns but table [2, 3] has 3");
  if (device().is_cuda()) {
    Tensor host = Tensor::Zeros({2, 3});
    ExpectErrorContains([&] { ops::Exp(host, out); }, "Exp: operands on cpu and cuda:0");
  }
}

// Outputs that may not overlap their inputs are refused, naming both.
TEST_P(OpsMathTest, ForbiddenAliasingIsRefused) {
  Tensor square = Tensor::Zeros({4, 4}, device());
  ExpectErrorContains([&] { ops::Transpose(square, square); },
                      "Transpose: out [4, 4] overlaps x [4, 4]; Transpose cannot write out in "
                      "place: give it a separate tensor");
  Tensor buffer = Tensor::Zeros({6}, device());
  Tensor first = buffer.Slice(0, 4), shifted = buffer.Slice(2, 6);
  ExpectErrorContains([&] { ops::Exp(first, shifted); },
                      "Exp: out [4] partly overlaps x [4]; pass x itself as out, or a separate "
                      "tensor");
  Tensor rows = Tensor::Zeros({4, 1}, device());
  Tensor sums = rows.Reshape({4});
  ExpectErrorContains([&] { ops::RowSum(rows, sums); }, "RowSum: out [4] overlaps x [4, 1]");
  Tensor x = Tensor::Zeros({1, 4}, device());
  Tensor v = x.Reshape({4});
  ExpectErrorContains([&] { ops::BroadcastAdd(x, v, Broadcast::kRow, x); },
                      "BroadcastAdd: out [1, 4] overlaps v [4]");
  Tensor table = Tensor::Zeros({4, 2}, device());
  Tensor index_view = table.Reshape({8}).Slice(0, 2);
  ExpectErrorContains([&] { ops::ScatterAddRows(Tensor::Zeros({2, 2}, device()), index_view,
                                                table); },
                      "ScatterAddRows: table [4, 2] overlaps indices [2]");
  ExpectErrorContains([&] { ops::GatherRows(table, Tensor::Zeros({4}, device()), table); },
                      "GatherRows: out [4, 2] overlaps table [4, 2]");
}

TEST_P(OpsMathTest, EmptyOperandsAreNoOps) {
  Tensor empty = Tensor::Zeros({0, 3}, device()), out = Tensor::Zeros({0, 3}, device());
  ops::Exp(empty, out);
  ops::BroadcastAdd(empty, Tensor::Zeros({3}, device()), Broadcast::kRow, out);
  ops::Softmax(empty, out);
  Tensor none = Tensor::Zeros({0}, device());
  ops::RowMax(empty, none);
  Tensor transposed = Tensor::Zeros({3, 0}, device());
  ops::Transpose(empty, transposed);
  ops::GatherRows(Tensor::Zeros({2, 3}, device()), none, out);
  Tensor table = Tensor::Full({2, 3}, 1.f, device());
  ops::ScatterAddRows(out, none, table);
  ExpectSameFloats(table.ToVector(), std::vector<float>(6, 1.f), "table after an empty scatter");
}

// The lane-first forms queue on the lane given: here the side lane, ordered
// with the main lane by WaitFor.
TEST_P(OpsMathTest, LaneFirstFormsRunOnTheGivenLane) {
  Backend& backend = GetBackend(device());
  const Lane main = backend.main_lane(), side = backend.side_lane();
  // Made (copied to the device) on the main lane, before the side lane waits.
  Tensor x = Make({1, 2, 3, 4}, {2, 2}), v = Make({10, 20}, {2});
  Tensor out = Tensor::Empty({2, 2}, device()), sums = Tensor::Empty({2}, device());
  ops::WaitFor(side, main);
  ops::MulScalar(side, x, 2.f, out);
  ops::BroadcastAdd(side, out, v, Broadcast::kColumn, out);
  ops::RowSum(side, out, sums);
  ops::WaitFor(main, side);
  ExpectSameFloats(out.ToVector(), {12, 14, 26, 28}, "side lane ops");
  ExpectSameFloats(sums.ToVector(), {26, 54}, "side lane RowSum");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(OpsMathTest);

}  // namespace
}  // namespace tandem
