// Host-side launchers of the attention kernels behind core/ops_attention.h
// (kernels_attention.cu): the fused causal softmax, its gradient, and the
// batched transpose. The products are cuBLAS calls (cuda_attention_ops.cc).
//
// Plain C++, as core/cuda/kernels_math.h: each launcher queues one kernel on
// `stream`, checks the launch and returns without waiting; none takes
// scratch memory. Contracts are Backend's (core/backend.h); operands are
// float32 or bfloat16 device memory of one dtype, loaded into float and
// rounded once when stored.
//
//   kernels::CausalSoftmax(stream, x, out, batch, t, 0.125f);
#ifndef TANDEM_CORE_CUDA_KERNELS_ATTENTION_H_
#define TANDEM_CORE_CUDA_KERNELS_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/backend.h"
#include "core/dtype.h"

namespace tandem {
namespace cuda {
namespace kernels {

// One block per row of the batch * t rows [t]: scale, mask, row maximum,
// exponentials, sum and normalisation in one kernel; float32 sums in an
// order fixed by t alone. out may be x.
void CausalSoftmax(cudaStream_t stream, CPtr x, Ptr out, int64_t batch, int64_t t, float scale);
// One block per row: the row's sum of dy * y, then dx. dx may be y or dy.
void CausalSoftmaxBackward(cudaStream_t stream, CPtr y, CPtr dy, Ptr dx, int64_t batch, int64_t t,
                           float scale);
// 32 x 32 tiles through shared memory, the batch along the grid's z; out
// apart from x.
void TransposeBatched(cudaStream_t stream, CPtr x, Ptr out, int64_t batch, int64_t rows,
                      int64_t cols);
// One thread per element of out (grid-stride), reading its element of x
// through the spec's strides; out apart from x.
void Permute(cudaStream_t stream, CPtr x, Ptr out, const PermuteSpec& spec);
// One thread per element (grid-stride); out may be x.
void MaskedFill(cudaStream_t stream, CPtr x, const float* mask, int64_t n, int64_t mask_n,
                float fill, Ptr out);

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNELS_ATTENTION_H_
