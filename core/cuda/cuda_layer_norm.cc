// The CUDA kernels of layer normalisation (core/ops_layer_norm.h): the fused
// kernels of core/cuda/kernels_layer_norm.h, queued on the stream of the
// lane given, with no scratch memory and no host wait, so every lane may run
// them.
#include "core/cuda/context.h"
#include "core/op_table.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels_layer_norm.h"

namespace tandem {
namespace cuda {
namespace op_kernels {

void LayerNormForward(const Lane& lane, CPtr x, CPtr weight, CPtr bias, float eps,
                      int64_t rows, int64_t cols, Ptr y, float* mean,
                      float* rstd) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::LayerNormForward(context.StreamOf(lane, "LayerNormForward"), x, weight, bias, eps, rows,
                            cols, y, mean, rstd);
}

void LayerNormBackward(const Lane& lane, CPtr x, CPtr dy, CPtr weight,
                       const float* mean, const float* rstd, int64_t rows,
                       int64_t cols, Ptr dx, float* dweight, float* dbias) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::LayerNormBackward(context.StreamOf(lane, "LayerNormBackward"), x, dy, weight, mean, rstd,
                             rows, cols, dx, dweight, dbias);
}

}  // namespace op_kernels
}  // namespace cuda
}  // namespace tandem
