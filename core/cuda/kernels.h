// Host-side launchers of the CUDA backend's kernels (core/cuda/kernels_elementwise.cu,
// core/cuda/kernels_update.cu, core/cuda/kernels_reduce.cu).
//
// Plain C++: callers compile with the host compiler and see no CUDA types but
// cudaStream_t. Each launcher queues its kernel(s) on `stream`, checks the
// launch (TANDEM_CUDA_CHECK_LAUNCH) and returns without waiting. Arguments
// follow core/backend.h, where each op's contract is written; the scalar math
// comes from core/kernel_math.h, shared with the CPU backend.
//
//   kernels::Fill(stream, 0.f, grad.ptr(), n);
//   kernels::Axpy(stream, -lr, grad.ptr(), param.ptr(), n);  // any dtypes
//
// Reductions that produce one number (SoftmaxCrossEntropy, Mse, CountCorrect)
// are deterministic: per-row or per-block partial sums go to a caller-given
// scratch buffer (of *ScratchBytes() bytes, device memory usable on `stream`),
// then one block adds them in a fixed order. The number of partials depends
// only on the problem size, never on the GPU, so a rerun, or another GPU,
// gives the same bits.
#ifndef TANDEM_CORE_CUDA_KERNELS_H_
#define TANDEM_CORE_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "core/dtype.h"

namespace tandem {
namespace cuda {
namespace kernels {

// Operands are CPtr/Ptr (core/dtype.h): float32 or bfloat16 device memory,
// loaded into float, computed in float32 and rounded once when stored (the
// CPU backend's semantics; see Note [bfloat16 rounding on the GPU] in
// kernel_helpers.cuh). Each launcher takes the dtype combinations that
// core/ops.cc lets through and throws, naming the op and the operands, for
// another.

// x, pre, out: [rows, cols]; bias: [cols]; pre may be null. One dtype.
void BiasActivation(cudaStream_t stream, Activation activation, CPtr x, CPtr bias,
                    Ptr pre, Ptr out, int64_t rows, int64_t cols);
// out: [cols] = beta * out + alpha * sum over rows of x [rows, cols], summed
// in float32; x and out of either dtype; deterministic (a fixed order that
// depends on the shape and scratch_bytes alone: Note [Column sums in chunks]
// in kernels_reduce.cu). `scratch` holds partial sums; no other work on
// other streams may use it until this finishes.
void ColumnSums(cudaStream_t stream, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, Ptr out, void* scratch, size_t scratch_bytes);
// dz = dy * act'(x) and sums = beta * sums + the column sums of dz as
// stored, in one pass over [rows, cols]: the same bits as ActivationBackward
// then ColumnSums (alpha 1). dy and dz share a dtype; dz may be dy.
void ActivationBackwardColumnSums(cudaStream_t stream, Activation activation, CPtr x,
                                  CPtr dy, Ptr dz, int64_t rows, int64_t cols, float beta,
                                  Ptr sums, void* scratch, size_t scratch_bytes);
// a, b, out of one dtype.
void Binary(cudaStream_t stream, BinaryOp op, CPtr a, CPtr b, Ptr out, int64_t n);
// y += alpha * x; x and y each of either dtype.
void Axpy(cudaStream_t stream, float alpha, CPtr x, Ptr y, int64_t n);
void Scale(cudaStream_t stream, float alpha, Ptr x, int64_t n);
void Fill(cudaStream_t stream, float value, Ptr x, int64_t n);
// Fill of float32 memory held as a float* (tests of streams and events).
inline void Fill(cudaStream_t stream, float value, float* x, int64_t n) {
  Fill(stream, value, Ptr{x, DType::kFloat32}, n);
}
// dst = src in dst's dtype (float32 -> bfloat16 rounds to nearest even);
// a copy when the dtypes agree.
void Cast(cudaStream_t stream, CPtr src, Ptr dst, int64_t n);
void TrackNonFinite(cudaStream_t stream, const float* loss, int64_t step,
                    float* first_bad);
// x and y of one dtype.
void ActivationForward(cudaStream_t stream, Activation activation, CPtr x, Ptr y,
                       int64_t n);
// x of either dtype; dy and dx of one.
void ActivationBackward(cudaStream_t stream, Activation activation, CPtr x, CPtr dy,
                        Ptr dx, int64_t n, bool accumulate);

// logits and dlogits (data null: none) of one dtype; labels, the loss and
// the softmax in float32 (double sums). Rows whose label is not a class
// index in [0, classes) get a NaN loss and NaN gradients, so a bad label
// cannot go unnoticed (the CPU backend throws; a kernel cannot).
size_t SoftmaxCrossEntropyScratchBytes(int64_t rows);
void SoftmaxCrossEntropy(cudaStream_t stream, CPtr logits, const float* labels,
                         int64_t rows, int64_t classes, float normalizer, void* scratch,
                         float* loss, Ptr dlogits);

// pred and target each of either dtype; dpred (data null: none) pred's.
size_t MseScratchBytes(int64_t n);
void Mse(cudaStream_t stream, CPtr pred, CPtr target, int64_t n, float normalizer,
         void* scratch, float* loss, Ptr dpred);

// out: [rows], the index (as a float) of the first maximum of each row.
void Argmax(cudaStream_t stream, CPtr x, int64_t rows, int64_t cols, float* out);
// out[0] = rows whose argmax equals the label; NaN if any label is not a
// class index.
size_t CountCorrectScratchBytes(int64_t rows);
void CountCorrect(cudaStream_t stream, CPtr logits, const float* labels, int64_t rows,
                  int64_t classes, void* scratch, float* out);

// Bitwise identical to the CPU backend's mask (kernel_math::DropoutScale),
// in either dtype.
void DropoutMask(cudaStream_t stream, float p, uint64_t seed, uint64_t offset, Ptr mask,
                 int64_t n);

// param and the state (velocity, m, v) float32; grad of either dtype;
// velocity may be null (no momentum). `working` (data null: none) receives
// the updated parameter in its dtype, in the same pass.
void SgdUpdate(cudaStream_t stream, const SgdParams& params, float* param, CPtr grad,
               float* velocity, Ptr working, int64_t n);
// step counts from 1.
void AdamWUpdate(cudaStream_t stream, const AdamWParams& params, int64_t step, float* param,
                 CPtr grad, float* m, float* v, Ptr working, int64_t n);

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNELS_H_
