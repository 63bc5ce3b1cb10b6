// The CPU backend's loops for layer normalisation (core/ops_layer_norm.h).
// As in cpu_math.h, they work on float32 arrays: cpu_backend.cc widens
// bfloat16 operands first and rounds the results back once.
//
// Rows (and, for the weight and bias gradients, columns) are spread over the
// intra-op threads in pieces fixed by the shape; every sum runs in an order
// fixed by the shape (a row's sums in lanes, Note [Sums in lanes] in
// lane_reduce.h; a column's down the rows in row order), so the bits do not
// depend on the thread count.
//
//   cpu::math::LayerNormForward(intra, x, w, b, 1e-5f, rows, cols, y, mean, rstd);
//   cpu::math::LayerNormBackward(intra, x, dy, w, mean, rstd, rows, cols, dx, dw, db);
#ifndef TANDEM_CORE_CPU_CPU_LAYER_NORM_H_
#define TANDEM_CORE_CPU_CPU_LAYER_NORM_H_

#include <cstdint>

#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {
namespace math {

// dispatch::LayerNormForward on float32 arrays; a row's sums in lanes.
void LayerNormForward(const IntraOp& intra, const float* x, const float* weight,
                      const float* bias, float eps, int64_t rows, int64_t cols, float* y,
                      float* mean, float* rstd);
// dispatch::LayerNormBackward on float32 arrays: dx written (null: skipped),
// dweight and dbias added into (each null: skipped), their sums in row order.
void LayerNormBackward(const IntraOp& intra, const float* x, const float* dy,
                       const float* weight, const float* mean, const float* rstd, int64_t rows,
                       int64_t cols, float* dx, float* dweight, float* dbias);

}  // namespace math
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_LAYER_NORM_H_
