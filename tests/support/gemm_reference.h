// The CPU GEMM tests' cases and reference: every transpose of a list of
// sizes, and a naive double-precision product of row-major operands to
// compare a result with, within a tolerance scaled by the magnitude of the
// terms (float32 accumulation; bfloat16 products are exact in float32).
//
//   for (const GemmCase& t : GemmCases({{3, 5, 7}, {40, 600, 0}})) {
//     ...  // run the GEMM into got
//     ExpectGemmNearReference(t, a_at, b_at, c_before, got);
//   }
#ifndef TANDEM_TESTS_SUPPORT_GEMM_REFERENCE_H_
#define TANDEM_TESTS_SUPPORT_GEMM_REFERENCE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace tandem {
namespace test {

// c [m, n] = alpha op(a) op(b) + beta c; a stored [m, k] or, with trans_a,
// [k, m]; b [k, n] or [n, k].
struct GemmCase {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
};

// The four transposes of each {m, n, k}, alpha and beta in turn (1, 0),
// (0.5, 1) and (-2, 0.25).
inline std::vector<GemmCase> GemmCases(const std::vector<std::array<int64_t, 3>>& sizes) {
  const float scalars[][2] = {{1.f, 0.f}, {0.5f, 1.f}, {-2.f, 0.25f}};
  std::vector<GemmCase> cases;
  int i = 0;
  for (const auto& s : sizes) {
    for (int trans = 0; trans < 4; ++trans) {
      const auto& ab = scalars[i++ % 3];
      cases.push_back({(trans & 1) != 0, (trans & 2) != 0, s[0], s[1], s[2], ab[0], ab[1]});
    }
  }
  return cases;
}

// Runs `gemm(c)` on a copy of `c_before` and returns it. With beta == 0 the
// copy holds NaN first: c may hold garbage then, which must not reach the
// result.
template <typename Gemm>
std::vector<float> RunOnCopyOfC(const GemmCase& t, const std::vector<float>& c_before,
                                const Gemm& gemm) {
  std::vector<float> c = c_before;
  if (t.beta == 0.f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  gemm(c.data());
  return c;
}

// Element (r, c) of op(a) [m, k] or op(b) [k, n], from the stored operand.
using GemmElement = std::function<double(int64_t r, int64_t c)>;

// Element (r, c) of the logical [rows, cols] matrix that `x` stores
// row-major, transposed when `trans`, through `value` (a widening, for
// bfloat16 bits).
template <typename T, typename Value>
GemmElement StoredElement(const std::vector<T>& x, bool trans, int64_t rows, int64_t cols,
                          Value value) {
  return [&x, trans, rows, cols, value](int64_t r, int64_t c) {
    return static_cast<double>(value(trans ? x[c * rows + r] : x[r * cols + c]));
  };
}

// got [m, n] against alpha op(a) op(b) + beta c_before.
inline void ExpectGemmNearReference(const GemmCase& t, const GemmElement& a, const GemmElement& b,
                                    const std::vector<float>& c_before,
                                    const std::vector<float>& got) {
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = a(i, p) * b(p, j);
        sum += x;
        magnitude += std::fabs(x);
      }
      const double c = t.beta == 0.f ? 0.0 : double(t.beta) * c_before[i * t.n + j];
      const double want = t.alpha * sum + c;
      const double tol = 1e-5 * (std::fabs(t.alpha) * magnitude + std::fabs(c) + 1.0);
      ASSERT_NEAR(got[i * t.n + j], want, tol)
          << "element (" << i << ", " << j << ") of " << (t.trans_a ? "a^T" : "a") << " "
          << (t.trans_b ? "b^T" : "b") << " m=" << t.m << " n=" << t.n << " k=" << t.k
          << " alpha=" << t.alpha << " beta=" << t.beta;
    }
  }
}

}  // namespace test
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_GEMM_REFERENCE_H_
