// Host-side launchers of the CUDA kernels behind the math ops of
// core/ops_math.h: element-wise functions, scalars and broadcasts
// (kernels_math.cu), row reductions and softmax (kernels_math_rows.cu),
// transpose and row gather/scatter-add (kernels_math_index.cu).
//
// Plain C++, as core/cuda/kernels.h: each launcher queues its kernel on
// `stream`, checks the launch and returns without waiting; none takes
// scratch memory. Contracts are Backend's (core/backend.h); operands are
// float32 or bfloat16 device memory, loaded into float and rounded once when
// stored (Note [bfloat16 rounding on the GPU] in kernel_helpers.cuh).
//
//   kernels::Unary(stream, UnaryOp::kExp, x.ptr(), out.ptr(), n);
//   kernels::RowReduce(stream, RowReduction::kMean, x.ptr(), rows, cols, mean.ptr());
#ifndef TANDEM_CORE_CUDA_KERNELS_MATH_H_
#define TANDEM_CORE_CUDA_KERNELS_MATH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/backend.h"
#include "core/dtype.h"

namespace tandem {
namespace cuda {
namespace kernels {

// x and out of one dtype; out may be x.
void Unary(cudaStream_t stream, UnaryOp op, CPtr x, Ptr out, int64_t n);
// out = x op s; x and out of one dtype; out may be x.
void BinaryScalar(cudaStream_t stream, BinaryOp op, CPtr x, float s, Ptr out, int64_t n);
// out [rows, cols] = x op v laid as `how` says; one dtype; out may be x.
void BroadcastBinary(cudaStream_t stream, BinaryOp op, Broadcast how, CPtr x, CPtr v,
                     Ptr out, int64_t rows, int64_t cols);

// One block per row (cols > 0), its size fixed by cols alone, so a rerun or
// another GPU gives the same bits. x and out each of either dtype.
void RowReduce(cudaStream_t stream, RowReduction op, CPtr x, int64_t rows, int64_t cols,
               Ptr out);
// One block per row; x and out of one dtype; out may be x.
void Softmax(cudaStream_t stream, CPtr x, Ptr out, int64_t rows, int64_t cols);

// 32 x 32 tiles through shared memory; one dtype; out apart from x.
void Transpose(cudaStream_t stream, CPtr x, Ptr out, int64_t rows, int64_t cols);
// table and out of one dtype; a row whose index is not a whole number in
// [0, table_rows) is filled with NaN.
void GatherRows(cudaStream_t stream, CPtr table, int64_t table_rows, const float* indices,
                int64_t n, int64_t cols, Ptr out);
// Deterministic, no float atomics: see Note [Deterministic scatter-add] in
// kernels_math_index.cu. src and table each of either dtype; positions
// whose index is not a row of the table are skipped.
void ScatterAddRows(cudaStream_t stream, CPtr src, const float* indices, int64_t n,
                    int64_t cols, Ptr table, int64_t table_rows);

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNELS_MATH_H_
