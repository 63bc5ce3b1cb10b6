// Host-side launchers of the fused layer-normalisation kernels behind
// core/ops_layer_norm.h (kernels_layer_norm.cu).
//
// Plain C++, as core/cuda/kernels_math.h: each launcher queues its kernels
// on `stream`, checks the launch and returns without waiting; none takes
// scratch memory. Contracts are Backend's (core/backend.h): x, weight,
// bias, y, dy and dx float32 or bfloat16, one dtype; mean, rstd, dweight
// and dbias float32.
//
//   kernels::LayerNormForward(stream, x, w, b, 1e-5f, rows, cols, y, mean, rstd);
//   kernels::LayerNormBackward(stream, x, dy, w, mean, rstd, rows, cols, dx, dw, db);
#ifndef TANDEM_CORE_CUDA_KERNELS_LAYER_NORM_H_
#define TANDEM_CORE_CUDA_KERNELS_LAYER_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace tandem {
namespace cuda {
namespace kernels {

// One block per row: mean, variance (two passes), normalise and affine in
// one kernel, float32 accumulators in an order fixed by cols alone.
void LayerNormForward(cudaStream_t stream, CPtr x, CPtr weight, CPtr bias, float eps,
                      int64_t rows, int64_t cols, Ptr y, float* mean, float* rstd);
// dx: one block per row (skipped when dx.data is null). dweight and dbias
// (each null: skipped): one kernel of column sums, each block summing 32
// columns over all rows in a fixed order, added into the old values.
void LayerNormBackward(cudaStream_t stream, CPtr x, CPtr dy, CPtr weight,
                       const float* mean, const float* rstd, int64_t rows, int64_t cols,
                       Ptr dx, float* dweight, float* dbias);

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNELS_LAYER_NORM_H_
