// ops::BatchedMatMul (core/ops_attention.h) against a float64 loop over the
// batch, one test body for CPU and CUDA (CUDA cases skip, saying why, where
// no GPU is visible). The BUILD file runs it once per CPU GEMM path (oneDNN,
// Eigen; bfloat16 multiplied as it is or widened) and with several intra-op
// thread counts, so that chunks of the batch and per-product blocked GEMMs
// (Note [Batched GEMMs on the CPU]) are all taken.
//
// Tolerances. A product of k float32 terms summed in float32 is within
// k 2^-24 sum |alpha a b| (plus beta c's rounding) of the exact sum; the
// bound used is (k + 2) 2^-24 (|alpha| sum |a b| + |beta c|), with TF32 off.
// bfloat16 operands are exact in float32 and so are their products, so the
// bound holds for them too; a bfloat16 result adds one rounding, 2^-8 of
// its value.
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
constexpr double kUnitRoundoff = 1.0 / (1 << 24);

// One case: op(a) [m, k] and op(b) [k, n] for each of `batch` products;
// a or b broadcast (2-D) when so marked.
struct Case {
  int64_t batch, m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  bool broadcast_a = false, broadcast_b = false;
};

std::string Describe(const Case& t, DType ab, DType c) {
  return "batch=" + std::to_string(t.batch) + " m=" + std::to_string(t.m) +
         " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
         " trans_a=" + std::to_string(t.trans_a) + " trans_b=" + std::to_string(t.trans_b) +
         " alpha=" + std::to_string(t.alpha) + " beta=" + std::to_string(t.beta) +
         (t.broadcast_a ? " a broadcast" : "") + (t.broadcast_b ? " b broadcast" : "") + " " +
         DTypeName(ab) + " into " + DTypeName(c);
}

// c[i] = alpha op(a[i]) op(b[i]) + beta c[i] in double, and the magnitude of
// its terms (|alpha| sum |a b| + |beta c|) for the tolerance.
void Reference(const Case& t, const std::vector<float>& a, const std::vector<float>& b,
               const std::vector<float>& c, std::vector<double>& out,
               std::vector<double>& magnitude) {
  out.assign(c.size(), 0.0);
  magnitude.assign(c.size(), 0.0);
  const int64_t stride_a = t.broadcast_a ? 0 : t.m * t.k;
  const int64_t stride_b = t.broadcast_b ? 0 : t.k * t.n;
  for (int64_t p = 0; p < t.batch; ++p) {
    const float* ap = a.data() + p * stride_a;
    const float* bp = b.data() + p * stride_b;
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < t.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < t.k; ++l) {
          const double x = t.trans_a ? ap[l * t.m + i] : ap[i * t.k + l];
          const double y = t.trans_b ? bp[j * t.k + l] : bp[l * t.n + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        const int64_t at = (p * t.m + i) * t.n + j;
        const double old = t.beta == 0.f ? 0.0 : static_cast<double>(t.beta) * c[at];
        out[at] = t.alpha * sum + old;
        magnitude[at] = std::fabs(t.alpha) * mag + std::fabs(old);
      }
    }
  }
}

using testing::DeviceTest;
class BatchedMatMulTest : public DeviceTest {
 protected:
  // n values in [-1, 1), representable in `dtype`.
  std::vector<float> Values(int64_t n, DType dtype) {
    std::vector<float> v(n);
    for (float& x : v) {
      x = rng_.Uniform(-1.f, 1.f);
      if (dtype == kBf16) x = RoundToBFloat16(x);
    }
    return v;
  }

  // Runs the case on the device and checks it against Reference.
  void Check(const Case& t, DType ab, DType c_dtype) {
    const std::string what = Describe(t, ab, c_dtype);
    const Shape a_matrix = t.trans_a ? Shape{t.k, t.m} : Shape{t.m, t.k};
    const Shape b_matrix = t.trans_b ? Shape{t.n, t.k} : Shape{t.k, t.n};
    const Shape a_shape = t.broadcast_a ? a_matrix : Shape{t.batch, a_matrix[0], a_matrix[1]};
    const Shape b_shape = t.broadcast_b ? b_matrix : Shape{t.batch, b_matrix[0], b_matrix[1]};
    const std::vector<float> a = Values(NumElements(a_shape), ab);
    const std::vector<float> b = Values(NumElements(b_shape), ab);
    // With beta == 0, c starts as NaN: it must not be read.
    std::vector<float> c(t.batch * t.m * t.n, std::nanf(""));
    if (t.beta != 0.f) c = Values(c.size(), c_dtype);
    Tensor ta = Tensor::FromVector(a, a_shape, device(), ab);
    Tensor tb = Tensor::FromVector(b, b_shape, device(), ab);
    Tensor tc = Tensor::FromVector(c, {t.batch, t.m, t.n}, device(), c_dtype);
    ops::BatchedMatMul(ta, t.trans_a, tb, t.trans_b, tc, t.alpha, t.beta);
    const std::vector<float> got = tc.ToVector();
    std::vector<double> expected, magnitude;
    Reference(t, a, b, c, expected, magnitude);
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i) {
      double tolerance = (t.k + 2) * kUnitRoundoff * magnitude[i] + 1e-30;
      // A bfloat16 C is rounded once (half a unit in its last place, at
      // most |expected| / 256); on CUDA with beta != 0, partial sums are
      // rounded into C (dispatch::BatchedGemm), each within 1/256 of its
      // size, which is at most `magnitude`: 8 such roundings allowed.
      if (c_dtype == kBf16) {
        const bool several_roundings = device().is_cuda() && t.beta != 0.f;
        tolerance += several_roundings ? 8 * magnitude[i] / 256 : std::fabs(expected[i]) / 256;
      }
      if (!(std::fabs(got[i] - expected[i]) <= tolerance) && bad++ == 0) {
        first = static_cast<int64_t>(i);
      }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size()
                      << " elements out of tolerance, the first at " << first << ": "
                      << (first >= 0 ? got[first] : 0.f) << ", expected "
                      << (first >= 0 ? expected[first] : 0.0);
  }

  // Every transpose of {batch, m, n, k}, alpha and beta in turn (1, 0),
  // (0.5, 1) and (-2, 0.25).
  void CheckAllTransposes(int64_t batch, int64_t m, int64_t n, int64_t k, DType ab, DType c) {
    const float scalars[][2] = {{1.f, 0.f}, {0.5f, 1.f}, {-2.f, 0.25f}};
    for (int trans = 0; trans < 4; ++trans) {
      const auto& s = scalars[trans % 3];
      Check({batch, m, n, k, (trans & 1) != 0, (trans & 2) != 0, s[0], s[1]}, ab, c);
    }
  }

  Rng rng_{43};
};

TEST_P(BatchedMatMulTest, Float32MatchesDoubleForEveryTranspose) {
  CheckAllTransposes(3, 5, 7, 4, kF32, kF32);
  CheckAllTransposes(1, 9, 3, 17, kF32, kF32);
  CheckAllTransposes(12, 33, 31, 16, kF32,
                     kF32);  // attention-like: many small products
}

TEST_P(BatchedMatMulTest, LargeBatchesAndLargeProducts) {
  // Enough work for several chunks of the batch on the CPU.
  CheckAllTransposes(8, 128, 128, 320, kF32, kF32);
  // Fewer products than threads, each large enough to be split in blocks.
  Check({2, 256, 256, 640, false, true, 1.f, 0.f}, kF32, kF32);
  Check({2, 256, 256, 640, true, false, 0.5f, 1.f}, kBf16, kF32);
}

TEST_P(BatchedMatMulTest, BFloat16MatchesDoubleForEveryTranspose) {
  for (DType c : {kF32, kBf16}) {
    CheckAllTransposes(3, 5, 7, 4, kBf16, c);
    CheckAllTransposes(12, 33, 31, 16, kBf16, c);
    CheckAllTransposes(8, 128, 128, 320, kBf16, c);
  }
}

TEST_P(BatchedMatMulTest, A2DOperandIsUsedForEveryProduct) {
  for (DType dtype : {kF32, kBf16}) {
    for (int trans = 0; trans < 4; ++trans) {
      const bool ta = (trans & 1) != 0, tb = (trans & 2) != 0;
      Check({5, 6, 7, 8, ta, tb, 1.f, 0.f, true, false}, dtype, dtype);
      Check({5, 6, 7, 8, ta, tb, 0.5f, 1.f, false, true}, dtype, kF32);
      Check({9, 64, 48, 40, ta, tb, 1.f, 0.f, false, true}, dtype, kF32);
    }
  }
}

TEST_P(BatchedMatMulTest, FoldsLeadingDimensions) {
  // q [B, H, T, hs] times k^T: scores [B, H, T, T], as attention takes them.
  const int64_t B = 2, H = 3, T = 5, hs = 4;
  const std::vector<float> q = Values(B * H * T * hs, kF32), k = Values(B * H * T * hs, kF32);
  Tensor tq = Tensor::FromVector(q, {B, H, T, hs}, device());
  Tensor tk = Tensor::FromVector(k, {B, H, T, hs}, device());
  Tensor scores = Tensor::Empty({B, H, T, T}, device());
  ops::BatchedMatMul(tq, false, tk, true, scores);
  Tensor folded = Tensor::Empty({B * H, T, T}, device());
  ops::BatchedMatMul(tq.Reshape({B * H, T, hs}), false, tk.Reshape({B * H, T, hs}), true, folded);
  EXPECT_EQ(scores.ToVector(), folded.ToVector());
  Case t{B * H, T, T, hs, false, true, 1.f, 0.f};
  std::vector<double> expected, magnitude;
  Reference(t, q, k, std::vector<float>(B * H * T * T), expected, magnitude);
  const std::vector<float> got = scores.ToVector();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], (hs + 2) * kUnitRoundoff * magnitude[i]) << "at " << i;
  }
}

TEST_P(BatchedMatMulTest, EmptyInnerDimensionScalesC) {
  Tensor a = Tensor::Zeros({3, 2, 0}, device());
  Tensor b = Tensor::Zeros({3, 0, 4}, device());
  Tensor c = Tensor::Full({3, 2, 4}, 2.f, device());
  ops::BatchedMatMul(a, false, b, false, c, 1.f, 0.5f);
  EXPECT_EQ(c.ToVector(), std::vector<float>(24, 1.f));
  ops::BatchedMatMul(a, false, b, false, c);
  EXPECT_EQ(c.ToVector(), std::vector<float>(24, 0.f));
}

using testing::ExpectErrorContains;

TEST_P(BatchedMatMulTest, BadShapesAreErrorsThatNameThem) {
  const Device d = device();
  Tensor a = Tensor::Zeros({4, 2, 3}, d), b = Tensor::Zeros({4, 5, 6}, d);
  Tensor c = Tensor::Zeros({4, 2, 6}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(a, false, b, false, c); },
                      "BatchedMatMul: op(a) is [..., 2, 3] but op(b) is [..., 5, 6]: inner "
                      "dimensions differ (a [4, 2, 3], b [4, 5, 6])");
  Tensor b3 = Tensor::Zeros({4, 3, 6}, d), c_wrong = Tensor::Zeros({4, 6, 2}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(a, false, b3, false, c_wrong); },
                      "BatchedMatMul: c is [4, 6, 2], expected [..., 2, 6]");
  Tensor b_batch = Tensor::Zeros({5, 3, 6}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(a, false, b_batch, false, c); },
                      "BatchedMatMul: b [5, 3, 6] has batch dimensions [5] but c [4, 2, 6] "
                      "has [4]");
  Tensor a4 = Tensor::Zeros({2, 2, 2, 3}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(a4, false, b3, false, c); },
                      "a [2, 2, 2, 3] has batch dimensions [2, 2] but c [4, 2, 6] has [4]");
  Tensor v = Tensor::Zeros({3}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(v, false, b3, false, c); },
                      "BatchedMatMul: a must have at least 2 dimensions ([..., rows, cols]), "
                      "got [3]");
  Tensor c_bf16 = Tensor::Zeros({4, 2, 6}, d, kBf16);
  ExpectErrorContains([&] { ops::BatchedMatMul(a, false, b3, false, c_bf16); },
                      "float32 a and b give a float32 result, but c is bfloat16 [4, 2, 6]");
  Tensor b_bf16 = Tensor::Zeros({4, 3, 6}, d, kBf16);
  ExpectErrorContains([&] { ops::BatchedMatMul(a, false, b_bf16, false, c); },
                      "they must share a dtype");
  // c over a's own memory.
  Tensor square = Tensor::Zeros({4, 3, 3}, d);
  ExpectErrorContains([&] { ops::BatchedMatMul(square, false, square, false, square); },
                      "cannot write c in place");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(BatchedMatMulTest);

}  // namespace
}  // namespace tandem
