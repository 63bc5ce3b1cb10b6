#include "core/cpu/cpu_math_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/dtype.h"
#include "core/elementwise_math.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

float RowSum(const float* row, int64_t cols) {
  float sum = 0.f;
  for (int64_t c = 0; c < cols; ++c) sum += row[c];
  return sum;
}

float RowMax(const float* row, int64_t cols) {
  float max = -INFINITY;
  for (int64_t c = 0; c < cols; ++c) max = kernel_math::MaxOrNan(max, row[c]);
  return max;
}

// Two passes: the mean, then the mean of squared deviations from it.
float RowVariance(const float* row, int64_t cols) {
  const float mean = RowSum(row, cols) / static_cast<float>(cols);
  float sum = 0.f;
  for (int64_t c = 0; c < cols; ++c) {
    const float d = row[c] - mean;
    sum += d * d;
  }
  return sum / static_cast<float>(cols);
}

// Square tiles keep both the rows read and the rows written in cache.
constexpr int64_t kTile = 32;

template <typename T>
void TransposeAs(const T* x, T* out, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(r0 + kTile, rows), c1 = std::min(c0 + kTile, cols);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = x[r * cols + c];
      }
    }
  }
}

// The float32 values of one row of `table` and back, in its dtype.
void LoadRow(Ptr table, int64_t row, int64_t cols, float* values) {
  if (table.dtype == DType::kFloat32) {
    std::memcpy(values, static_cast<const float*>(table.data) + row * cols,
                cols * sizeof(float));
    return;
  }
  WidenBFloat16(static_cast<const uint16_t*>(table.data) + row * cols, values, cols);
}

void StoreRow(const float* values, int64_t row, int64_t cols, Ptr table) {
  if (table.dtype == DType::kFloat32) {
    std::memcpy(static_cast<float*>(table.data) + row * cols, values, cols * sizeof(float));
    return;
  }
  RoundToBFloat16(values, static_cast<uint16_t*>(table.data) + row * cols, cols);
}

}  // namespace

void Unary(const IntraOp& intra, UnaryOp op, const float* x, float* out, int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = kernel_math::ApplyUnary(op, x[i]);
  });
}

void BinaryScalar(const IntraOp& intra, BinaryOp op, const float* x, float s, float* out,
                  int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = kernel_math::ApplyBinary(op, x[i], s);
  });
}

void BroadcastBinary(const IntraOp& intra, BinaryOp op, Broadcast how, const float* x,
                     const float* v, float* out, int64_t rows, int64_t cols) {
  if (rows == 1) {
    // One long row (a gradient scaled by one factor): its columns in pieces.
    intra.ForRanges(cols, kPieceElements, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        out[c] = kernel_math::ApplyBinary(op, x[c], how == Broadcast::kRow ? v[c] : v[0]);
      }
    });
    return;
  }
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float* outr = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        outr[c] = kernel_math::ApplyBinary(op, xr[c], how == Broadcast::kRow ? v[c] : v[r]);
      }
    }
  });
}

void RowReduce(const IntraOp& intra, RowReduction op, const float* x, int64_t rows,
               int64_t cols, float* out) {
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * cols;
      switch (op) {
        case RowReduction::kSum: out[r] = RowSum(row, cols); break;
        case RowReduction::kMean: out[r] = RowSum(row, cols) / static_cast<float>(cols); break;
        case RowReduction::kMax: out[r] = RowMax(row, cols); break;
        case RowReduction::kVariance: out[r] = RowVariance(row, cols); break;
      }
    }
  });
}

void Softmax(const IntraOp& intra, const float* x, float* out, int64_t rows, int64_t cols) {
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * cols;
      float* outr = out + r * cols;
      const float max = RowMax(xr, cols);
      float sum = 0.f;
      for (int64_t c = 0; c < cols; ++c) {
        outr[c] = std::exp(xr[c] - max);  // reads xr[c] before it may overwrite it
        sum += outr[c];
      }
      for (int64_t c = 0; c < cols; ++c) outr[c] /= sum;
    }
  });
}

void Transpose(const void* x, void* out, int64_t rows, int64_t cols, size_t element_bytes) {
  if (element_bytes == 4) {
    TransposeAs(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), rows, cols);
  } else {
    TANDEM_CHECK(element_bytes == 2) << "Transpose of " << element_bytes << "-byte elements";
    TransposeAs(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), rows, cols);
  }
}

void CheckRowIndices(const char* op, const float* indices, int64_t n, int64_t table_rows) {
  for (int64_t i = 0; i < n; ++i) {
    const float index = indices[i];
    // Compared as a float first: converting NaN or a huge float is undefined.
    TANDEM_CHECK(index >= 0.f && index < static_cast<float>(table_rows) &&
                 std::floor(index) == index)
        << op << ": index " << index << " at position " << i
        << " is not a row of the table (whole numbers in [0, " << table_rows << "))";
  }
}

void GatherRows(const void* table, const float* indices, int64_t n, int64_t cols,
                size_t element_bytes, void* out) {
  const size_t row_bytes = static_cast<size_t>(cols) * element_bytes;
  const char* from = static_cast<const char*>(table);
  char* to = static_cast<char*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(indices[i]);
    std::memcpy(to + i * row_bytes, from + row * row_bytes, row_bytes);
  }
}

void ScatterAddRows(const float* src, const float* indices, int64_t n, int64_t cols,
                    Ptr table) {
  // Positions grouped by index, each group in the order of the positions.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  std::vector<float> row_values(static_cast<size_t>(cols));
  for (int64_t begin = 0; begin < n;) {
    const int64_t row = static_cast<int64_t>(indices[order[begin]]);
    int64_t end = begin;
    LoadRow(table, row, cols, row_values.data());
    for (; end < n && static_cast<int64_t>(indices[order[end]]) == row; ++end) {
      const float* s = src + order[end] * cols;
      for (int64_t c = 0; c < cols; ++c) row_values[c] += s[c];
    }
    StoreRow(row_values.data(), row, cols, table);
    begin = end;
  }
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
