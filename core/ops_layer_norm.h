// Layer normalisation as two fused ops: the forward pass over each row of
// x, and its backward pass, for layers/layer_norm.h and custom layers. Part
// of the public op set: `#include "core/ops.h"` brings them in. Like every
// op, each checks its operands and runs on a lane of their device (or the
// main lane of x's device when the call names none), with no host wait and
// no scratch memory.
//
//   // x, y [rows, features]; weight, bias [features]; mean, rstd [rows]
//   ops::LayerNormForward(lane, x, weight, bias, 1e-5f, y, mean, rstd);
//   ops::LayerNormBackward(lane, x, dy, weight, mean, rstd, &dx, &dweight, &dbias);
//
// Forward: per row, mean and population variance var in float32 (two
// passes), rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * weight +
// bias, rounded once into y's dtype. Backward, with xhat = (x - mean) *
// rstd and g = dy * weight:
//   dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))   (row means)
//   dweight += sum over rows of dy * xhat
//   dbias   += sum over rows of dy
//
// Dtypes: x, weight, bias, y, dy and dx float32 or bfloat16, all one dtype;
// mean, rstd, dweight and dbias float32 (statistics and gradients keep
// float32 even for bfloat16 activations). On a GPU each row is one block
// (cuda/kernels_layer_norm.h); every sum has an order fixed by the shape,
// so a rerun gives the same bits.
#ifndef TANDEM_CORE_OPS_LAYER_NORM_H_
#define TANDEM_CORE_OPS_LAYER_NORM_H_

#include "core/backend.h"
#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace ops {

// x and y [rows, features], weight and bias [features]; mean and rstd
// float32 [rows], written. y must not overlap x. eps > 0 keeps a constant
// row finite.
void LayerNormForward(const Lane& lane, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
// x, weight, mean and rstd as LayerNormForward took and gave them; dy
// [rows, features]. dx (written) and dweight, dbias (float32 [features],
// added into) may each be null to skip it; dx must not overlap the inputs.
void LayerNormBackward(const Lane& lane, const Tensor& x, const Tensor& dy,
                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                       Tensor* dx, Tensor* dweight, Tensor* dbias);

// The same on the main lane of x's device.
inline void LayerNormForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  LayerNormForward(x.backend().main_lane(), x, weight, bias, eps, y, mean, rstd);
}
inline void LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor* dx,
                              Tensor* dweight, Tensor* dbias) {
  LayerNormBackward(x.backend().main_lane(), x, dy, weight, mean, rstd, dx, dweight, dbias);
}

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OPS_LAYER_NORM_H_
