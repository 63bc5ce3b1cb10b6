// The op set of CudaContext: each op queues cuBLAS calls or Tandem's kernels
// (core/cuda/kernels.h) on the stream of the lane it is given.
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/cuda/tf32.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels.h"

namespace tandem {
namespace cuda {

// Row-major C = op(A) op(B) through column-major cuBLAS: a row-major [r, c]
// matrix is a column-major [c, r] one, i.e. its transpose. So cuBLAS
// computes C^T [n, m] = op(B)^T op(A)^T, passing B first. Leading dimensions
// are the stored row lengths: A is [m, k] (lda = k) or, when transposed,
// [k, m] (lda = m); B is [k, n] (ldb = n) or [n, k] (ldb = k).
void CudaContext::Gemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m,
                       int64_t n, int64_t k, float alpha, const float* a,
                       const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  DeviceGuard guard(device_);
  CudaLane& state = LaneOf(lane, "Gemm");
  if (k <= 0) {
    // An empty sum; cuBLAS rejects lda = 0. beta == 0 overwrites garbage.
    if (beta == 0.f) {
      kernels::Fill(state.stream(), 0.f, c, m * n);
    } else {
      kernels::Scale(state.stream(), beta, c, m * n);
    }
    return;
  }
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const bool tf32 = AllowTf32();
  const int sm_target = GemmSmTarget(lane);
  state.WithBlas([&](Blas& blas) {
    if (tf32 != blas.tf32) {
      CUBLAS_CHECK(cublasSetMathMode(
          blas.handle.get(), tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
      blas.tf32 = tf32;
    }
    if (sm_target != blas.sm_target) {
      CUBLAS_CHECK(cublasSetSmCountTarget(blas.handle.get(), sm_target));
      blas.sm_target = sm_target;
    }
    CUBLAS_CHECK(cublasSgemm_64(blas.handle.get(), op_b, op_a, n, m, k, &alpha, b,
                                ldb, a, lda, &beta, c, n))
        << "Gemm m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
        << " trans_b=" << trans_b << " on the " << lane.Describe();
  });
}

// One cuBLASLt call where it can (see core/cuda/lt_gemm.h): the result goes
// straight to d, with the bias and ReLU applied on the way out.
void CudaContext::GemmEx(const Lane& lane, bool trans_a, bool trans_b, int64_t m,
                         int64_t n, int64_t k, float alpha, const float* a,
                         const float* b, float beta, const float* c, float* d,
                         const GemmEpilogue& epilogue) {
  if (m <= 0 || n <= 0) return;
  const bool relu = epilogue.activation == Activation::kRelu;
  if (k > 0 && (relu || epilogue.activation == Activation::kIdentity)) {
    DeviceGuard guard(device_);
    LtGemmCall call;
    call.trans_a = trans_a;
    call.trans_b = trans_b;
    call.m = m;
    call.n = n;
    call.k = k;
    call.alpha = alpha;
    call.a = a;
    call.b = b;
    call.beta = beta;
    call.c = c;
    call.d = d;
    call.bias = epilogue.bias;
    call.relu = relu;
    call.tf32 = AllowTf32();
    call.sm_count_target = GemmSmTarget(lane);
    const bool done = LaneOf(lane, "GemmEx").WithBlas(
        [&](Blas& blas) { return blas.lt.Run(blas.stream, call); });
    if (done) return;
  }
  Backend::GemmEx(lane, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, d, epilogue);
}

void CudaContext::BiasActivation(const Lane& lane, Activation activation,
                                 const float* x, const float* bias, float* pre,
                                 float* out, int64_t rows, int64_t cols) {
  DeviceGuard guard(device_);
  kernels::BiasActivation(StreamOf(lane, "BiasActivation"), activation, x, bias,
                          pre, out, rows, cols);
}

void CudaContext::ColumnSums(const Lane& lane, const float* x, int64_t rows,
                             int64_t cols, float alpha, float beta, float* out) {
  DeviceGuard guard(device_);
  kernels::ColumnSums(StreamOf(lane, "ColumnSums"), x, rows, cols, alpha, beta, out);
}

void CudaContext::Binary(const Lane& lane, BinaryOp op, const float* a,
                         const float* b, float* out, int64_t n) {
  DeviceGuard guard(device_);
  kernels::Binary(StreamOf(lane, "Binary"), op, a, b, out, n);
}

void CudaContext::Axpy(const Lane& lane, float alpha, const float* x, float* y,
                       int64_t n) {
  DeviceGuard guard(device_);
  kernels::Axpy(StreamOf(lane, "Axpy"), alpha, x, y, n);
}

void CudaContext::Scale(const Lane& lane, float alpha, float* x, int64_t n) {
  DeviceGuard guard(device_);
  kernels::Scale(StreamOf(lane, "Scale"), alpha, x, n);
}

void CudaContext::Fill(const Lane& lane, float value, float* x, int64_t n) {
  DeviceGuard guard(device_);
  kernels::Fill(StreamOf(lane, "Fill"), value, x, n);
}

void CudaContext::TrackNonFinite(const Lane& lane, const float* loss, int64_t step,
                                 float* first_bad) {
  DeviceGuard guard(device_);
  kernels::TrackNonFinite(StreamOf(lane, "TrackNonFinite"), loss, step, first_bad);
}

void CudaContext::ActivationForward(const Lane& lane, Activation activation,
                                    const float* x, float* y, int64_t n) {
  DeviceGuard guard(device_);
  kernels::ActivationForward(StreamOf(lane, "ActivationForward"), activation, x, y, n);
}

void CudaContext::ActivationBackward(const Lane& lane, Activation activation,
                                     const float* x, const float* dy, float* dx,
                                     int64_t n, bool accumulate) {
  DeviceGuard guard(device_);
  kernels::ActivationBackward(StreamOf(lane, "ActivationBackward"), activation, x,
                              dy, dx, n, accumulate);
}

void CudaContext::SoftmaxCrossEntropy(const Lane& lane, const float* logits,
                                      const float* labels, int64_t rows,
                                      int64_t classes, float normalizer,
                                      float* loss, float* dlogits) {
  if (rows <= 0) return;
  DeviceGuard guard(device_);
  MainLaneOnly(lane, "SoftmaxCrossEntropy");
  Scratch scratch(allocator_, kernels::SoftmaxCrossEntropyScratchBytes(rows));
  kernels::SoftmaxCrossEntropy(main_.stream(), logits, labels, rows, classes,
                               normalizer, scratch.data(), loss, dlogits);
}

void CudaContext::Mse(const Lane& lane, const float* pred, const float* target,
                      int64_t n, float normalizer, float* loss, float* dpred) {
  if (n <= 0) return;
  DeviceGuard guard(device_);
  MainLaneOnly(lane, "Mse");
  Scratch scratch(allocator_, kernels::MseScratchBytes(n));
  kernels::Mse(main_.stream(), pred, target, n, normalizer, scratch.data(), loss,
               dpred);
}

void CudaContext::Argmax(const Lane& lane, const float* x, int64_t rows,
                         int64_t cols, float* out) {
  DeviceGuard guard(device_);
  kernels::Argmax(StreamOf(lane, "Argmax"), x, rows, cols, out);
}

void CudaContext::CountCorrect(const Lane& lane, const float* logits,
                               const float* labels, int64_t rows, int64_t classes,
                               float* out) {
  if (rows <= 0) return;
  DeviceGuard guard(device_);
  MainLaneOnly(lane, "CountCorrect");
  Scratch scratch(allocator_, kernels::CountCorrectScratchBytes(rows));
  kernels::CountCorrect(main_.stream(), logits, labels, rows, classes,
                        scratch.data(), out);
}

void CudaContext::DropoutMask(const Lane& lane, float p, uint64_t seed,
                              uint64_t offset, float* mask, int64_t n) {
  DeviceGuard guard(device_);
  kernels::DropoutMask(StreamOf(lane, "DropoutMask"), p, seed, offset, mask, n);
}

void CudaContext::SgdUpdate(const Lane& lane, const SgdParams& params, float* param,
                            const float* grad, float* velocity, int64_t n) {
  DeviceGuard guard(device_);
  kernels::SgdUpdate(StreamOf(lane, "SgdUpdate"), params, param, grad, velocity, n);
}

void CudaContext::AdamWUpdate(const Lane& lane, const AdamWParams& params,
                              int64_t step, float* param, const float* grad,
                              float* m, float* v, int64_t n) {
  DeviceGuard guard(device_);
  kernels::AdamWUpdate(StreamOf(lane, "AdamWUpdate"), params, step, param, grad,
                       m, v, n);
}

}  // namespace cuda
}  // namespace tandem
