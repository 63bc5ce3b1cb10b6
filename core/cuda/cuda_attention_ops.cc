// The CUDA kernels of the attention ops (core/ops_attention.h): a batch of
// products is one cublasGemmStridedBatchedEx call, the causal softmax, its
// gradient and the batched transpose one kernel each
// (core/cuda/kernels_attention.h). All queue on the stream of the lane they
// are given, with no scratch memory and no host wait, so every lane may run
// them.
#include <cublas_v2.h>

#include "core/check.h"
#include "core/cuda/context.h"
#include "core/op_table.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels_attention.h"
#include "core/cuda/tf32.h"

namespace tandem {
namespace cuda {
namespace {

cudaDataType_t CudaType(DType dtype) {
  return dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

}  // namespace

namespace op_kernels {

// Row-major through column-major cuBLAS, as SgemmInPlace (cuda_ops.cc): each
// C[i]^T [n, m] = op(B[i])^T op(A[i])^T, with B passed first; a stride of 0
// gives every product the same matrix.
void BatchedGemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m, int64_t n,
                 int64_t k, float alpha, CPtr a, CPtr b, float beta, Ptr c,
                 const GemmBatch& batch, bool tf32) {
  CudaContext& context = ContextOf(lane);
  if (m <= 0 || n <= 0 || batch.count <= 0) return;
  DeviceGuard guard(context.index());
  const char* op = "BatchedGemm";
  if (k <= 0) {
    // An empty sum (cuBLAS rejects lda = 0); beta == 0 overwrites garbage.
    const int64_t size = batch.count * m * n;
    if (beta == 0.f) {
      Fill(lane, 0.f, c, size);
    } else {
      Scale(lane, beta, c, size);
    }
    return;
  }
  const bool use_tf32 = a.dtype == DType::kFloat32 && (tf32 || AllowTf32());
  const cublasComputeType_t compute = use_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const int sm_target = context.GemmSmTarget(lane);
  context.LaneOf(lane, op).WithBlas([&](Blas& blas) {
    blas.Configure(use_tf32, sm_target);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
        blas.handle.get(), op_b, op_a, n, m, k, &alpha, b.data, CudaType(b.dtype), ldb,
        batch.stride_b, a.data, CudaType(a.dtype), lda, batch.stride_a, &beta, c.data,
        CudaType(c.dtype), n, m * n, batch.count, compute, CUBLAS_GEMM_DEFAULT))
        << op << " of " << batch.count << " products m=" << m << " n=" << n << " k=" << k
        << " trans_a=" << trans_a << " trans_b=" << trans_b << " " << DTypeName(a.dtype) << " into "
        << DTypeName(c.dtype) << " on the " << lane.Describe();
  });
}

void CausalSoftmax(const Lane& lane, CPtr x, Ptr out, int64_t batch, int64_t t,
                   float scale) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::CausalSoftmax(context.StreamOf(lane, "CausalSoftmax"), x, out, batch, t, scale);
}

void CausalSoftmaxBackward(const Lane& lane, CPtr y, CPtr dy, Ptr dx, int64_t batch,
                           int64_t t, float scale) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::CausalSoftmaxBackward(context.StreamOf(lane, "CausalSoftmaxBackward"), y, dy, dx,
                                 batch, t, scale);
}

void TransposeBatched(const Lane& lane, CPtr x, Ptr out, int64_t batch, int64_t rows,
                      int64_t cols) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::TransposeBatched(context.StreamOf(lane, "TransposeBatched"), x, out, batch, rows, cols);
}

void Permute(const Lane& lane, CPtr x, Ptr out, const PermuteSpec& spec) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Permute(context.StreamOf(lane, "Permute"), x, out, spec);
}

void MaskedFill(const Lane& lane, CPtr x, const float* mask, int64_t n,
                int64_t mask_n, float fill, Ptr out) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::MaskedFill(context.StreamOf(lane, "MaskedFill"), x, mask, n, mask_n, fill, out);
}

}  // namespace op_kernels
}  // namespace cuda
}  // namespace tandem
