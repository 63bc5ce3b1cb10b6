#include "core/cpu/cpu_layer_norm.h"

#include <cmath>

#include "core/cpu/lane_reduce.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

// Columns per piece of the weight and bias gradients: a few cache lines of
// each row, so that pieces of a narrow layer still spread over threads.
constexpr int64_t kColumnGrain = 64;

void NormalizeRow(const float* row, const float* weight, const float* bias, float eps,
                  int64_t cols, float* out, float* mean, float* rstd) {
  const float n = static_cast<float>(cols);
  const float m = LaneSum(cols, [&](int64_t c) { return row[c]; }) / n;
  // Two passes: squared deviations from the mean, not E[x^2] - mean^2,
  // which loses every digit when the mean is large.
  const float squares = LaneSum(cols, [&](int64_t c) {
    const float d = row[c] - m;
    return d * d;
  });
  const float s = 1.f / std::sqrt(squares / n + eps);
  *mean = m;
  *rstd = s;
  for (int64_t c = 0; c < cols; ++c) out[c] = (row[c] - m) * s * weight[c] + bias[c];
}

// dx of one row.
void RowGradient(const float* xr, const float* g, const float* weight, float m, float s,
                 int64_t cols, float* out) {
  const float n = static_cast<float>(cols);
  // Sums of g = dy * weight, and of g * xhat.
  const float sum_g = LaneSum(cols, [&](int64_t c) { return g[c] * weight[c]; });
  const float sum_gx =
      LaneSum(cols, [&](int64_t c) { return g[c] * weight[c] * ((xr[c] - m) * s); });
  const float mean_g = sum_g / n, mean_gx = sum_gx / n;
  for (int64_t c = 0; c < cols; ++c) {
    const float xhat = (xr[c] - m) * s;
    out[c] = s * (g[c] * weight[c] - mean_g - xhat * mean_gx);
  }
}

}  // namespace

void LayerNormForward(const IntraOp& intra, const float* x, const float* weight,
                      const float* bias, float eps, int64_t rows, int64_t cols, float* y,
                      float* mean, float* rstd) {
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      NormalizeRow(x + r * cols, weight, bias, eps, cols, y + r * cols, mean + r, rstd + r);
    }
  });
}

void LayerNormBackward(const IntraOp& intra, const float* x, const float* dy,
                       const float* weight, const float* mean, const float* rstd, int64_t rows,
                       int64_t cols, float* dx, float* dweight, float* dbias) {
  if (dweight != nullptr || dbias != nullptr) {
    // Each column summed down the rows in row order, whatever the pieces.
    intra.ForRanges(cols, kColumnGrain, [&](int64_t begin, int64_t end) {
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* g = dy + r * cols;
        const float m = mean[r], s = rstd[r];
        for (int64_t c = begin; c < end; ++c) {
          if (dweight != nullptr) dweight[c] += g[c] * ((xr[c] - m) * s);
          if (dbias != nullptr) dbias[c] += g[c];
        }
      }
    });
  }
  if (dx == nullptr) return;
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RowGradient(x + r * cols, dy + r * cols, weight, mean[r], rstd[r], cols, dx + r * cols);
    }
  });
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
