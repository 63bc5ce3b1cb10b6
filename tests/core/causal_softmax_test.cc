// ops::CausalSoftmax and ops::CausalSoftmaxBackward (core/ops_attention.h)
// against float64 references, one test body for CPU and CUDA (CUDA cases
// skip, saying why, where no GPU is visible).
//
// Tolerances. The forward pass rounds scale * x, takes expf (a few units in
// the last place), sums up to T terms in float32 and divides: within
// relative (T + 8) 2^-23 of the double result. The backward pass sums T
// products and takes a difference: within (T + 8) 2^-23 of sum |dy y| times
// y and scale, plus the same of the element's own terms. bfloat16 outputs
// add one rounding, 2^-8 of the value (inputs are rounded to bfloat16 first,
// so both dtypes see the same numbers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// The causal softmax of `batch` matrices [t, t] in double.
std::vector<double> SoftmaxReference(const std::vector<float>& x, int64_t batch, int64_t t,
                                     float scale) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < batch * t; ++r) {
    const int64_t seen = r % t + 1;
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < seen; ++c) max = std::fmax(max, double{scale} * x[r * t + c]);
    for (int64_t c = 0; c < seen; ++c) sum += std::exp(double{scale} * x[r * t + c] - max);
    for (int64_t c = 0; c < seen; ++c) {
      y[r * t + c] = std::exp(double{scale} * x[r * t + c] - max) / sum;
    }
  }
  return y;
}

// dx = scale y (dy - sum dy y) in double, and each element's magnitude
// scale y (|dy| + sum |dy y|) for the tolerance.
std::vector<double> BackwardReference(const std::vector<float>& y, const std::vector<float>& dy,
                                      int64_t batch, int64_t t, float scale,
                                      std::vector<double>& magnitude) {
  std::vector<double> dx(y.size(), 0.0);
  magnitude.assign(y.size(), 0.0);
  for (int64_t r = 0; r < batch * t; ++r) {
    const int64_t seen = r % t + 1;
    double dot = 0, dot_mag = 0;
    for (int64_t c = 0; c < seen; ++c) {
      dot += double{dy[r * t + c]} * y[r * t + c];
      dot_mag += std::fabs(double{dy[r * t + c]} * y[r * t + c]);
    }
    for (int64_t c = 0; c < seen; ++c) {
      const int64_t i = r * t + c;
      dx[i] = double{scale} * y[i] * (dy[i] - dot);
      magnitude[i] = std::fabs(double{scale} * y[i]) * (std::fabs(dy[i]) + dot_mag);
    }
  }
  return dx;
}

bool Masked(int64_t index, int64_t t) { return index % t > (index / t) % t; }

// Every element within rel |expected| + abs_of[i] (abs_of may be empty),
// and masked ones (column > row) exactly 0.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& expected, int64_t t,
                 double rel, const std::vector<double>& abs_of, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  int64_t bad = 0, first = -1, masked_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (Masked(static_cast<int64_t>(i), t)) {
      // Exactly +0: the bits, not a comparison (-0 and tiny values fail).
      if (std::signbit(got[i]) || got[i] != 0.f) ++masked_bad;
      continue;
    }
    const double tolerance = rel * std::fabs(expected[i]) + (abs_of.empty() ? 0 : abs_of[i]);
    if (!(std::fabs(got[i] - expected[i]) <= tolerance) && bad++ == 0) {
      first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(masked_bad, 0) << what << ": masked entries (column > row) that are not exactly 0";
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance, the first at " << first
                    << ": " << (first >= 0 ? got[first] : 0.f) << ", expected "
                    << (first >= 0 ? expected[first] : 0.0);
}

using testing::DeviceTest;
class CausalSoftmaxTest : public DeviceTest {
 protected:
  std::vector<float> Values(int64_t n, float low, float high, DType dtype) {
    std::vector<float> v(n);
    for (float& x : v) {
      x = rng_.Uniform(low, high);
      if (dtype == kBf16) x = RoundToBFloat16(x);
    }
    return v;
  }
  Rng rng_{71};
};

double Rel(DType dtype, int64_t t) {
  return (t + 8) * std::ldexp(1.0, -23) + (dtype == kBf16 ? 1.0 / 256 : 0.0);
}

TEST_P(CausalSoftmaxTest, ForwardMatchesDoubleAndMasksExactly) {
  const float scale = 0.37f;
  for (DType dtype : {kF32, kBf16}) {
    for (int64_t t : {1, 5, 33, 300}) {
      const Shape shape{2, 3, t, t};
      const int64_t batch = 6;
      const std::string what = std::string(DTypeName(dtype)) + " T=" + std::to_string(t);
      const std::vector<float> x = Values(NumElements(shape), -6.f, 6.f, dtype);
      const std::vector<double> expected = SoftmaxReference(x, batch, t, scale);
      Tensor tx = Tensor::FromVector(x, shape, device(), dtype);
      Tensor out = Tensor::Empty(shape, device(), dtype);
      ops::CausalSoftmax(tx, scale, out);
      const std::vector<float> got = out.ToVector();
      ExpectClose(got, expected, t, Rel(dtype, t), {}, what + ", out of place");
      // Each row sums to 1.
      for (int64_t r = 0; r < batch * t; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < t; ++c) sum += got[r * t + c];
        ASSERT_NEAR(sum, 1.0, Rel(dtype, t)) << what << ", row " << r;
      }
      ops::CausalSoftmax(tx, scale, tx);
      EXPECT_EQ(tx.ToVector(), got) << what << ": in place differs from out of place";
    }
  }
}

// What x holds at a column past the row is never read: NaN, infinities or
// huge values there leave every row as it was, bit for bit.
TEST_P(CausalSoftmaxTest, ColumnsPastTheRowNeverMoveIt) {
  for (DType dtype : {kF32, kBf16}) {
    const int64_t t = 37;
    const Shape shape{3, t, t};
    std::vector<float> x = Values(NumElements(shape), -3.f, 3.f, dtype);
    Tensor clean = Tensor::Empty(shape, device(), dtype);
    ops::CausalSoftmax(Tensor::FromVector(x, shape, device(), dtype), 1.f, clean);
    const float poison[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
    for (size_t i = 0; i < x.size(); ++i) {
      if (Masked(static_cast<int64_t>(i), t)) x[i] = poison[i % 5];
    }
    Tensor poisoned = Tensor::Empty(shape, device(), dtype);
    ops::CausalSoftmax(Tensor::FromVector(x, shape, device(), dtype), 1.f, poisoned);
    EXPECT_EQ(poisoned.ToVector(), clean.ToVector()) << DTypeName(dtype);
  }
}

TEST_P(CausalSoftmaxTest, BackwardMatchesDouble) {
  const float scale = 0.5f;
  for (DType dtype : {kF32, kBf16}) {
    for (int64_t t : {1, 6, 40, 257}) {
      const Shape shape{2, 2, t, t};
      const int64_t batch = 4;
      const std::string what = std::string(DTypeName(dtype)) + " T=" + std::to_string(t);
      Tensor y = Tensor::Empty(shape, device(), dtype);
      ops::CausalSoftmax(
          Tensor::FromVector(Values(NumElements(shape), -2.f, 2.f, dtype), shape, device(), dtype),
          1.f, y);
      std::vector<float> dy = Values(NumElements(shape), -1.f, 1.f, dtype);
      const std::vector<float> yv = y.ToVector();
      std::vector<double> magnitude;
      const std::vector<double> expected = BackwardReference(yv, dy, batch, t, scale, magnitude);
      for (double& m : magnitude) m *= (t + 8) * std::ldexp(1.0, -23);
      const double rel = dtype == kBf16 ? 1.0 / 256 : 0.0;
      // Garbage in dy past the row must not reach dx either.
      for (size_t i = 0; i < dy.size(); ++i) {
        if (Masked(static_cast<int64_t>(i), t)) dy[i] = NAN;
      }
      Tensor tdy = Tensor::FromVector(dy, shape, device(), dtype);
      Tensor dx = Tensor::Empty(shape, device(), dtype);
      ops::CausalSoftmaxBackward(y, tdy, scale, dx);
      const std::vector<float> got = dx.ToVector();
      ExpectClose(got, expected, t, rel, magnitude, what);
      ops::CausalSoftmaxBackward(y, tdy, scale, tdy);
      EXPECT_EQ(tdy.ToVector(), got) << what << ": dx in dy's place differs";
    }
  }
}

// The gradient of L = sum w * CausalSoftmax(x) against central differences
// of the op itself, in float32.
TEST_P(CausalSoftmaxTest, BackwardMatchesFiniteDifferences) {
  const int64_t t = 5;
  const Shape shape{2, t, t};
  const float scale = 0.7f;
  const std::vector<float> x = Values(NumElements(shape), -1.5f, 1.5f, kF32);
  const std::vector<float> w = Values(NumElements(shape), -1.f, 1.f, kF32);
  auto loss = [&](const std::vector<float>& at) {
    Tensor y = Tensor::Empty(shape, device());
    ops::CausalSoftmax(Tensor::FromVector(at, shape, device()), scale, y);
    const std::vector<float> yv = y.ToVector();
    double sum = 0;
    for (size_t i = 0; i < yv.size(); ++i) sum += double{w[i]} * yv[i];
    return sum;
  };
  Tensor y = Tensor::Empty(shape, device());
  ops::CausalSoftmax(Tensor::FromVector(x, shape, device()), scale, y);
  Tensor dx = Tensor::Empty(shape, device());
  ops::CausalSoftmaxBackward(y, Tensor::FromVector(w, shape, device()), scale, dx);
  const std::vector<float> got = dx.ToVector();
  const float h = 1e-2f;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<float> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (double{plus[i]} - minus[i]);
    EXPECT_NEAR(got[i], numeric, 2e-3 + 2e-3 * std::fabs(numeric)) << "element " << i;
  }
}

using testing::ExpectErrorContains;

TEST_P(CausalSoftmaxTest, BadShapesAreErrorsThatNameThem) {
  const Device d = device();
  Tensor x = Tensor::Zeros({2, 4, 5}, d), out = Tensor::Zeros({2, 4, 5}, d);
  ExpectErrorContains([&] { ops::CausalSoftmax(x, 1.f, out); },
                      "CausalSoftmax: x is [2, 4, 5], but its last two dimensions must be "
                      "equal ([..., T, T]");
  Tensor v = Tensor::Zeros({4}, d);
  ExpectErrorContains([&] { ops::CausalSoftmax(v, 1.f, v); },
                      "CausalSoftmax: x must have at least 2 dimensions");
  Tensor sq = Tensor::Zeros({2, 4, 4}, d), wrong = Tensor::Zeros({8, 4}, d);
  ExpectErrorContains([&] { ops::CausalSoftmax(sq, 1.f, wrong); },
                      "CausalSoftmax: out is [8, 4] but x is [2, 4, 4]");
  Tensor sq_bf16 = Tensor::Zeros({2, 4, 4}, d, kBf16);
  ExpectErrorContains([&] { ops::CausalSoftmax(sq, 1.f, sq_bf16); }, "must share a dtype");
  ExpectErrorContains([&] { ops::CausalSoftmaxBackward(sq, wrong, 1.f, sq); },
                      "CausalSoftmaxBackward: dy is [8, 4] but y is [2, 4, 4]");
  Tensor part = sq.Reshape({32}).Slice(0, 16).Reshape({1, 4, 4});
  Tensor rest = sq.Reshape({32}).Slice(8, 24).Reshape({1, 4, 4});
  ExpectErrorContains([&] { ops::CausalSoftmax(part, 1.f, rest); }, "partly overlaps x");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(CausalSoftmaxTest);

}  // namespace
}  // namespace tandem
