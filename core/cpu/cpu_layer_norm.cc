#include "core/cpu/cpu_layer_norm.h"

#include <cmath>

namespace tandem {
namespace cpu {
namespace math {

void LayerNormForward(const float* x, const float* weight, const float* bias, float eps,
                      int64_t rows, int64_t cols, float* y, float* mean, float* rstd) {
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum += row[c];
    const float m = sum / n;
    // Two passes: squared deviations from the mean, not E[x^2] - mean^2,
    // which loses every digit when the mean is large.
    float squares = 0.f;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = row[c] - m;
      squares += d * d;
    }
    const float s = 1.f / std::sqrt(squares / n + eps);
    mean[r] = m;
    rstd[r] = s;
    float* out = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = (row[c] - m) * s * weight[c] + bias[c];
  }
}

void LayerNormBackward(const float* x, const float* dy, const float* weight,
                       const float* mean, const float* rstd, int64_t rows, int64_t cols,
                       float* dx, float* dweight, float* dbias) {
  const float n = static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* g = dy + r * cols;
    const float m = mean[r], s = rstd[r];
    if (dweight != nullptr || dbias != nullptr) {
      for (int64_t c = 0; c < cols; ++c) {
        if (dweight != nullptr) dweight[c] += g[c] * ((xr[c] - m) * s);
        if (dbias != nullptr) dbias[c] += g[c];
      }
    }
    if (dx == nullptr) continue;
    float sum_g = 0.f, sum_gx = 0.f;  // of g = dy * weight, and of g * xhat
    for (int64_t c = 0; c < cols; ++c) {
      const float gw = g[c] * weight[c];
      sum_g += gw;
      sum_gx += gw * ((xr[c] - m) * s);
    }
    const float mean_g = sum_g / n, mean_gx = sum_gx / n;
    float* out = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      out[c] = s * (g[c] * weight[c] - mean_g - xhat * mean_gx);
    }
  }
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
