#include "core/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/cpu/cpu_math_ops.h"
#include "core/elementwise_math.h"

namespace tandem {
namespace cpu {
namespace math {

// Row r of the batch is row i = r % t of its matrix and sees columns 0..i.
void CausalSoftmax(const IntraOp& intra, const float* x, float* out, int64_t batch, int64_t t,
                   float scale) {
  intra.ForRanges(batch * t, RowsPerPiece(t), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * t;
      float* outr = out + r * t;
      const int64_t seen = r % t + 1;
      float max = -INFINITY;
      for (int64_t c = 0; c < seen; ++c) max = kernel_math::MaxOrNan(max, scale * xr[c]);
      float sum = 0.f;
      for (int64_t c = 0; c < seen; ++c) {
        outr[c] = std::exp(scale * xr[c] - max);  // reads xr[c] before it may overwrite it
        sum += outr[c];
      }
      for (int64_t c = 0; c < seen; ++c) outr[c] /= sum;
      std::fill(outr + seen, outr + t, 0.f);
    }
  });
}

void CausalSoftmaxBackward(const IntraOp& intra, const float* y, const float* dy, float* dx,
                           int64_t batch, int64_t t, float scale) {
  intra.ForRanges(batch * t, RowsPerPiece(t), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* yr = y + r * t;
      const float* dyr = dy + r * t;
      float* dxr = dx + r * t;
      const int64_t seen = r % t + 1;
      float dot = 0.f;
      for (int64_t c = 0; c < seen; ++c) dot += dyr[c] * yr[c];
      for (int64_t c = 0; c < seen; ++c) dxr[c] = scale * (yr[c] * (dyr[c] - dot));
      std::fill(dxr + seen, dxr + t, 0.f);
    }
  });
}

void TransposeBatched(const IntraOp& intra, const void* x, void* out, int64_t batch, int64_t rows,
                      int64_t cols, size_t element_bytes) {
  const int64_t bytes = rows * cols * static_cast<int64_t>(element_bytes);
  const int64_t per_piece =
      std::max<int64_t>(1, kPieceElements / std::max<int64_t>(1, rows * cols));
  intra.ForRanges(batch, per_piece, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      Transpose(static_cast<const char*>(x) + b * bytes, static_cast<char*>(out) + b * bytes, rows,
                cols, element_bytes);
    }
  });
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
