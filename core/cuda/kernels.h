// Host-side launchers of the CUDA backend's kernels (core/cuda/kernels_elementwise.cu,
// core/cuda/kernels_reduce.cu).
//
// Plain C++: callers compile with the host compiler and see no CUDA types but
// cudaStream_t. Each launcher queues its kernel(s) on `stream`, checks the
// launch (TANDEM_CUDA_CHECK_LAUNCH) and returns without waiting. Arguments
// follow core/backend.h, where each op's contract is written; the scalar math
// comes from core/kernel_math.h, shared with the CPU backend.
//
//   kernels::Fill(stream, 0.f, grad, n);
//   kernels::Axpy(stream, -lr, grad, param, n);
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

namespace tandem {
namespace cuda {
namespace kernels {

// x, pre, out: [rows, cols]; bias: [cols]; pre may be null.
void BiasActivation(cudaStream_t stream, Activation activation, const float* x,
                    const float* bias, float* pre, float* out, int64_t rows,
                    int64_t cols);
// out: [cols] = beta * out + alpha * sum over rows of x [rows, cols];
// deterministic (each column is summed by one block, in a fixed order).
void ColumnSums(cudaStream_t stream, const float* x, int64_t rows, int64_t cols,
                float alpha, float beta, float* out);
void Binary(cudaStream_t stream, BinaryOp op, const float* a, const float* b,
            float* out, int64_t n);
void Axpy(cudaStream_t stream, float alpha, const float* x, float* y,
          int64_t n);
void Scale(cudaStream_t stream, float alpha, float* x, int64_t n);
void Fill(cudaStream_t stream, float value, float* x, int64_t n);
void TrackNonFinite(cudaStream_t stream, const float* loss, int64_t step,
                    float* first_bad);
void ActivationForward(cudaStream_t stream, Activation activation,
                       const float* x, float* y, int64_t n);
void ActivationBackward(cudaStream_t stream, Activation activation,
                        const float* x, const float* dy, float* dx, int64_t n,
                        bool accumulate);

// Rows whose label is not a class index in [0, classes) get a NaN loss and
// NaN gradients, so a bad label cannot go unnoticed (the CPU backend throws;
// a kernel cannot).
size_t SoftmaxCrossEntropyScratchBytes(int64_t rows);
void SoftmaxCrossEntropy(cudaStream_t stream, const float* logits,
                         const float* labels, int64_t rows, int64_t classes,
                         float normalizer, void* scratch, float* loss,
                         float* dlogits);

size_t MseScratchBytes(int64_t n);
void Mse(cudaStream_t stream, const float* pred, const float* target, int64_t n,
         float normalizer, void* scratch, float* loss, float* dpred);

// out: [rows], the index (as a float) of the first maximum of each row.
void Argmax(cudaStream_t stream, const float* x, int64_t rows, int64_t cols,
            float* out);
// out[0] = rows whose argmax equals the label; NaN if any label is not a
// class index.
size_t CountCorrectScratchBytes(int64_t rows);
void CountCorrect(cudaStream_t stream, const float* logits, const float* labels,
                  int64_t rows, int64_t classes, void* scratch, float* out);

// Bitwise identical to the CPU backend's mask (kernel_math::DropoutScale).
void DropoutMask(cudaStream_t stream, float p, uint64_t seed, uint64_t offset,
                 float* mask, int64_t n);

// velocity may be null (no momentum).
void SgdUpdate(cudaStream_t stream, const SgdParams& params, float* param,
               const float* grad, float* velocity, int64_t n);
// step counts from 1.
void AdamWUpdate(cudaStream_t stream, const AdamWParams& params, int64_t step,
                 float* param, const float* grad, float* m, float* v,
                 int64_t n);

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_KERNELS_H_
