// Tests core/cpu/cpu_layer_norm.h: forward and backward spread over threads
// give the very bits of the single-threaded loops written out here (each
// row's sums in 8 interleaved lanes, Note [Sums in lanes] in
// core/cpu/lane_reduce.h; each column's gradient sums in row order), on
// one thread and on four, for a wide layer (several pieces of rows and of
// columns) and a narrow one; the weight and bias gradients are added into
// what the arrays held.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cpu/cpu_layer_norm.h"
#include "core/cpu/cpu_thread_pool.h"
#include "tests/support/intra_op_runs.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

using testing_support::OnOneAndFour;
using testing_support::RandomNormals;

constexpr float kEps = 1e-5f;

// Element c of a row summed into lane c % 8, in column order; the lanes
// then added ((0+1)+(2+3))+((4+5)+(6+7)).
struct LaneSums {
  float lane[8] = {};
  int64_t next = 0;
  void Add(float v) { lane[next++ % 8] += v; }
  float Total() const {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
};

struct Forward {
  std::vector<float> y, mean, rstd;
};

// Layer normalisation of each row, as its definition reads.
Forward ForwardByDefinition(const std::vector<float>& x, const std::vector<float>& w,
                            const std::vector<float>& b, int64_t rows, int64_t cols) {
  Forward f{std::vector<float>(x.size()), std::vector<float>(rows), std::vector<float>(rows)};
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    LaneSums sum, squares;
    for (int64_t c = 0; c < cols; ++c) sum.Add(row[c]);
    const float m = sum.Total() / n;
    for (int64_t c = 0; c < cols; ++c) squares.Add((row[c] - m) * (row[c] - m));
    const float s = 1.f / std::sqrt(squares.Total() / n + kEps);
    f.mean[r] = m;
    f.rstd[r] = s;
    for (int64_t c = 0; c < cols; ++c) f.y[r * cols + c] = (row[c] - m) * s * w[c] + b[c];
  }
  return f;
}

// dx, and dweight, dbias added into `dw`, `db`, as the chain rule reads.
std::vector<float> BackwardByDefinition(const std::vector<float>& x, const std::vector<float>& dy,
                                        const std::vector<float>& w, const Forward& f,
                                        int64_t rows, int64_t cols, std::vector<float>& dw,
                                        std::vector<float>& db) {
  std::vector<float> dx(x.size());
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float m = f.mean[r], s = f.rstd[r];
    const float* xr = x.data() + r * cols;
    const float* g = dy.data() + r * cols;
    LaneSums sum_g, sum_gx;
    for (int64_t c = 0; c < cols; ++c) {
      dw[c] += g[c] * ((xr[c] - m) * s);
      db[c] += g[c];
      sum_g.Add(g[c] * w[c]);
      sum_gx.Add(g[c] * w[c] * ((xr[c] - m) * s));
    }
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      dx[r * cols + c] =
          s * (g[c] * w[c] - sum_g.Total() / n - xhat * (sum_gx.Total() / n));
    }
  }
  return dx;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << what << ", element " << i;
  }
}

class CpuLayerNormTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(CpuLayerNormTest, ThreadedLoopsGiveTheBitsOfTheDefinition) {
  const auto [rows, cols] = GetParam();
  const std::vector<float> x = RandomNormals(rows * cols, 1), dy = RandomNormals(rows * cols, 2);
  std::vector<float> w = RandomNormals(cols, 3), b = RandomNormals(cols, 4);
  for (float& v : w) v += 1.f;  // weights around 1, where training starts them
  const Forward want = ForwardByDefinition(x, w, b, rows, cols);
  std::vector<float> mean_got, rstd_got;
  const auto y = OnOneAndFour("LayerNormForward", [&](const IntraOp& intra) {
    Forward f{std::vector<float>(x.size()), std::vector<float>(rows), std::vector<float>(rows)};
    LayerNormForward(intra, x.data(), w.data(), b.data(), kEps, rows, cols, f.y.data(),
                     f.mean.data(), f.rstd.data());
    mean_got = f.mean;
    rstd_got = f.rstd;
    return f.y;
  });
  ExpectSameBits(y, want.y, "y");
  ExpectSameBits(mean_got, want.mean, "mean");
  ExpectSameBits(rstd_got, want.rstd, "rstd");

  // The gradients are added into what dweight and dbias held.
  const std::vector<float> dw0 = RandomNormals(cols, 5), db0 = RandomNormals(cols, 6);
  std::vector<float> dw_want = dw0, db_want = db0;
  const std::vector<float> dx_want =
      BackwardByDefinition(x, dy, w, want, rows, cols, dw_want, db_want);
  std::vector<float> dw_got, db_got;
  const auto dx = OnOneAndFour("LayerNormBackward", [&](const IntraOp& intra) {
    std::vector<float> dx_out(x.size()), dw = dw0, db = db0;
    LayerNormBackward(intra, x.data(), dy.data(), w.data(), want.mean.data(), want.rstd.data(),
                      rows, cols, dx_out.data(), dw.data(), db.data());
    dw_got = dw;
    db_got = db;
    // Gradients of the parameters alone (dx skipped), and of the input alone.
    std::vector<float> dw_only = dw0, dx_only(x.size());
    LayerNormBackward(intra, x.data(), dy.data(), w.data(), want.mean.data(), want.rstd.data(),
                      rows, cols, nullptr, dw_only.data(), nullptr);
    EXPECT_EQ(dw_only, dw) << "dweight without dx and dbias";
    LayerNormBackward(intra, x.data(), dy.data(), w.data(), want.mean.data(), want.rstd.data(),
                      rows, cols, dx_only.data(), nullptr, nullptr);
    EXPECT_EQ(dx_only, dx_out) << "dx without the parameter gradients";
    return dx_out;
  });
  ExpectSameBits(dx, dx_want, "dx");
  ExpectSameBits(dw_got, dw_want, "dweight");
  ExpectSameBits(db_got, db_want, "dbias");
}

// 300 x 333: four pieces of rows and six of columns, the last of each
// shorter; 5000 x 8: two pieces of rows (4096 a piece), one of columns;
// 1 x 1: a single element.
INSTANTIATE_TEST_SUITE_P(Shapes, CpuLayerNormTest,
                         ::testing::Values(std::make_pair<int64_t, int64_t>(300, 333),
                                           std::make_pair<int64_t, int64_t>(5000, 8),
                                           std::make_pair<int64_t, int64_t>(1, 1)));

}  // namespace
}  // namespace math
}  // namespace cpu
}  // namespace tandem
