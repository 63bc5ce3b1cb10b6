#include "core/cpu/cpu_layer_norm.h"

#include <cmath>
#include <type_traits>

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

// Columns of a block of the weight and bias gradients: as many as the
// compiler keeps the running sums of, both gradients', in vector registers.
constexpr int64_t kColumnBlock = 32;

struct ColumnSumArgs {
  const float *x, *dy, *mean, *rstd;
  int64_t rows, cols;
  float *dweight, *dbias;  // each may be null
};

// Adds the rows' terms of columns [begin, begin + width) (width <=
// kColumnBlock) into dweight and dbias, in row order: running sums that
// start from what the arrays hold, kept in local arrays (registers, where
// width is a compile-time kColumnBlock) rather than loaded and stored
// through the outputs at every row.
template <typename Width>
void AddColumnGradients(const ColumnSumArgs& a, int64_t begin, Width width) {
  float w[kColumnBlock], b[kColumnBlock];
  for (int64_t j = 0; j < width; ++j) {
    w[j] = a.dweight != nullptr ? a.dweight[begin + j] : 0.f;
    b[j] = a.dbias != nullptr ? a.dbias[begin + j] : 0.f;
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* xr = a.x + r * a.cols + begin;
    const float* g = a.dy + r * a.cols + begin;
    const float m = a.mean[r], s = a.rstd[r];
    for (int64_t j = 0; j < width; ++j) {
      w[j] += g[j] * ((xr[j] - m) * s);
      b[j] += g[j];
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    if (a.dweight != nullptr) a.dweight[begin + j] = w[j];
    if (a.dbias != nullptr) a.dbias[begin + j] = b[j];
  }
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
    // Each column summed down the rows in row order, whatever the pieces,
    // in blocks of kColumnBlock columns and then one of the rest.
    const ColumnSumArgs a{x, dy, mean, rstd, rows, cols, dweight, dbias};
    intra.ForRanges(cols, kColumnGrain, [&](int64_t begin, int64_t end) {
      int64_t c = begin;
      for (; c + kColumnBlock <= end; c += kColumnBlock) {
        AddColumnGradients(a, c, std::integral_constant<int64_t, kColumnBlock>());
      }
      if (c < end) AddColumnGradients(a, c, end - c);
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
