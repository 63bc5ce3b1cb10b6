// The CUDA kernels of the op table (core/op_table.h), GEMMs to losses and
// updates: each queues cuBLAS calls or Tandem's kernels
// (core/cuda/kernels.h) on the stream of the lane it is given.
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/op_table.h"
#include "core/cuda/tf32.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels.h"

namespace tandem {
namespace cuda {

namespace {

// The float32 view of a GEMM operand, for cublasSgemm (every other op's
// kernels take CPtr/Ptr of either dtype).
const float* F32(CPtr p, const char* op, const char* name) {
  TANDEM_CHECK(p.data == nullptr || p.dtype == DType::kFloat32)
      << op << " on a GPU: " << name << " is " << DTypeName(p.dtype)
      << ", which this op's CUDA kernel does not take";
  return static_cast<const float*>(p.data);
}
float* F32(Ptr p, const char* op, const char* name) {
  return const_cast<float*>(F32(CPtr(p), op, name));
}

// Row-major C = op(A) op(B) through column-major cuBLAS: a row-major [r, c]
// matrix is a column-major [c, r] one, i.e. its transpose. So cuBLAS
// computes C^T [n, m] = op(B)^T op(A)^T, passing B first. Leading dimensions
// are the stored row lengths: A is [m, k] (lda = k) or, when transposed,
// [k, m] (lda = m); B is [k, n] (ldb = n) or [n, k] (ldb = k).
void SgemmInPlace(const Lane& lane, bool trans_a, bool trans_b, int64_t m,
                  int64_t n, int64_t k, float alpha, const float* a,
                  const float* b, float beta, float* c, bool tf32) {
  CudaContext& context = ContextOf(lane);
  CudaLane& state = context.LaneOf(lane, "Gemm");
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const int sm_target = context.GemmSmTarget(lane);
  state.WithBlas([&](Blas& blas) {
    blas.Configure(tf32, sm_target);
    CUBLAS_CHECK(cublasSgemm_64(blas.handle.get(), op_b, op_a, n, m, k, &alpha, b, ldb, a,
                                lda, &beta, c, n))
        << "Gemm m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
        << " trans_b=" << trans_b << " on the " << lane.Describe();
  });
}

}  // namespace

namespace op_kernels {

// One cuBLASLt call where it can (see core/cuda/lt_gemm.h): the result goes
// straight to d, with the bias and ReLU applied on the way out. A plain
// in-place float32 product goes to cublasSgemm; what neither covers (GELU
// and tanh epilogues) runs as a GEMM and a bias-activation pass, so a
// bfloat16 d is rounded twice there (after the product and after the
// epilogue) where the CPU backend rounds once.
void Gemm(const Lane& lane, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, CPtr a, CPtr b, float beta, CPtr c, Ptr d,
          const GemmSpec& spec) {
  CudaContext& context = ContextOf(lane);
  if (m <= 0 || n <= 0) return;
  DeviceGuard guard(context.index());
  const bool tf32 = spec.tf32 || AllowTf32();
  const bool plain = spec.bias.data == nullptr && spec.activation == Activation::kIdentity &&
                     (c.data == d.data || beta == 0.f);
  if (k <= 0) {
    // An empty sum; cuBLAS rejects lda = 0. beta == 0 overwrites garbage.
    if (c.data != d.data && beta != 0.f) Cast(lane, c, d, m * n);
    if (beta == 0.f) {
      Fill(lane, 0.f, d, m * n);
    } else {
      Scale(lane, beta, d, m * n);
    }
    if (spec.bias.data != nullptr || spec.activation != Activation::kIdentity) {
      BiasActivation(lane, spec.activation, d, spec.bias, Ptr{}, d, m, n);
    }
    return;
  }
  if (plain && a.dtype == DType::kFloat32) {
    SgemmInPlace(lane, trans_a, trans_b, m, n, k, alpha, F32(a, "Gemm", "a"),
                 F32(b, "Gemm", "b"), beta, F32(d, "Gemm", "d"), tf32);
    return;
  }
  const bool relu = spec.activation == Activation::kRelu;
  if (relu || spec.activation == Activation::kIdentity) {
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
    call.bias = spec.bias;
    call.relu = relu;
    call.tf32 = tf32;
    call.sm_count_target = context.GemmSmTarget(lane);
    const bool done = context.LaneOf(lane, "Gemm").WithBlas(
        [&](Blas& blas) { return blas.lt.Run(blas.stream, call); });
    if (done) return;
  }
  // GELU or tanh (or no cuBLASLt algorithm): the product in place in d, then
  // the epilogue. The in-place product is a plain call, which float32 runs
  // on cublasSgemm; bfloat16 has only cuBLASLt, so a plain bfloat16 product
  // it refuses is an error rather than another round of this fallback.
  const bool epilogue = spec.bias.data != nullptr || spec.activation != Activation::kIdentity;
  TANDEM_CHECK(epilogue || a.dtype == DType::kFloat32)
      << "Gemm on a GPU: cuBLASLt offers no algorithm for a " << DTypeName(a.dtype)
      << " product m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
      << " trans_b=" << trans_b << " into " << DTypeName(d.dtype)
      << "; use float32 operands for this shape";
  if (c.data != d.data && beta != 0.f) Cast(lane, c, d, m * n);
  GemmSpec product;
  product.tf32 = spec.tf32;
  Gemm(lane, trans_a, trans_b, m, n, k, alpha, a, b, beta, d, d, product);
  if (epilogue) BiasActivation(lane, spec.activation, d, spec.bias, Ptr{}, d, m, n);
}

void BiasActivation(const Lane& lane, Activation activation, CPtr x, CPtr bias,
                    Ptr pre, Ptr out, int64_t rows, int64_t cols) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  const char* op = "BiasActivation";
  if (bias.data == nullptr) {
    TANDEM_CHECK(pre.data == nullptr) << op << ": pre needs a bias";
    ActivationForward(lane, activation, x, out, rows * cols);
    return;
  }
  kernels::BiasActivation(context.StreamOf(lane, op), activation, x, bias, pre, out, rows, cols);
}

void ColumnSums(const Lane& lane, CPtr x, int64_t rows, int64_t cols,
                float alpha, float beta, Ptr out) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  // The partial sums go in the lane's cuBLAS workspace: its stream runs one
  // call at a time, GEMMs included.
  context.LaneOf(lane, "ColumnSums").WithBlas([&](Blas& blas) {
    kernels::ColumnSums(blas.stream, x, rows, cols, alpha, beta, out, blas.workspace.data(),
                        blas.workspace.bytes());
  });
}

void Binary(const Lane& lane, BinaryOp op, CPtr a, CPtr b, Ptr out,
            int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Binary(context.StreamOf(lane, "Binary"), op, a, b, out, n);
}

void Axpy(const Lane& lane, float alpha, CPtr x, Ptr y, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Axpy(context.StreamOf(lane, "Axpy"), alpha, x, y, n);
}

void Scale(const Lane& lane, float alpha, Ptr x, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Scale(context.StreamOf(lane, "Scale"), alpha, x, n);
}

void Fill(const Lane& lane, float value, Ptr x, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Fill(context.StreamOf(lane, "Fill"), value, x, n);
}

void Cast(const Lane& lane, CPtr src, Ptr dst, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Cast(context.StreamOf(lane, "Cast"), src, dst, n);
}

void TrackNonFinite(const Lane& lane, const float* loss, int64_t step,
                    float* first_bad) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::TrackNonFinite(context.StreamOf(lane, "TrackNonFinite"), loss, step, first_bad);
}

void ActivationForward(const Lane& lane, Activation activation, CPtr x, Ptr y,
                       int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::ActivationForward(context.StreamOf(lane, "ActivationForward"), activation, x, y, n);
}

void ActivationBackward(const Lane& lane, Activation activation, CPtr x,
                        CPtr dy, Ptr dx, int64_t n, bool accumulate) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::ActivationBackward(context.StreamOf(lane, "ActivationBackward"), activation, x, dy, dx,
                              n, accumulate);
}

void ActivationBackwardColumnSums(const Lane& lane, Activation activation,
                                  CPtr x, CPtr dy, Ptr dz, int64_t rows,
                                  int64_t cols, float beta, Ptr sums) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  // Partial sums in the lane's cuBLAS workspace, as ColumnSums does.
  context.LaneOf(lane, "ActivationBackwardColumnSums").WithBlas([&](Blas& blas) {
    kernels::ActivationBackwardColumnSums(blas.stream, activation, x, dy, dz, rows, cols, beta,
                                          sums, blas.workspace.data(), blas.workspace.bytes());
  });
}

void SoftmaxCrossEntropy(const Lane& lane, CPtr logits, const float* labels,
                         int64_t rows, int64_t classes, float normalizer,
                         float* loss, Ptr dlogits) {
  CudaContext& context = ContextOf(lane);
  if (rows <= 0) return;
  DeviceGuard guard(context.index());
  context.MainLaneOnly(lane, "SoftmaxCrossEntropy");
  Scratch scratch(context.allocator(), kernels::SoftmaxCrossEntropyScratchBytes(rows));
  kernels::SoftmaxCrossEntropy(context.MainStream(), logits, labels, rows, classes, normalizer,
                               scratch.data(), loss, dlogits);
}

void Mse(const Lane& lane, CPtr pred, CPtr target, int64_t n, float normalizer,
         float* loss, Ptr dpred) {
  CudaContext& context = ContextOf(lane);
  if (n <= 0) return;
  DeviceGuard guard(context.index());
  context.MainLaneOnly(lane, "Mse");
  Scratch scratch(context.allocator(), kernels::MseScratchBytes(n));
  kernels::Mse(context.MainStream(), pred, target, n, normalizer, scratch.data(), loss, dpred);
}

void Argmax(const Lane& lane, CPtr x, int64_t rows, int64_t cols, float* out) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Argmax(context.StreamOf(lane, "Argmax"), x, rows, cols, out);
}

void CountCorrect(const Lane& lane, CPtr logits, const float* labels,
                  int64_t rows, int64_t classes, float* out) {
  CudaContext& context = ContextOf(lane);
  if (rows <= 0) return;
  DeviceGuard guard(context.index());
  context.MainLaneOnly(lane, "CountCorrect");
  Scratch scratch(context.allocator(), kernels::CountCorrectScratchBytes(rows));
  kernels::CountCorrect(context.MainStream(), logits, labels, rows, classes, scratch.data(), out);
}

void DropoutMask(const Lane& lane, float p, uint64_t seed, uint64_t offset,
                 Ptr mask, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::DropoutMask(context.StreamOf(lane, "DropoutMask"), p, seed, offset, mask, n);
}

void SgdUpdate(const Lane& lane, const SgdParams& params, float* param,
               CPtr grad, float* velocity, Ptr working, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::SgdUpdate(context.StreamOf(lane, "SgdUpdate"), params, param, grad, velocity, working,
                     n);
}

void AdamWUpdate(const Lane& lane, const AdamWParams& params, int64_t step,
                 float* param, CPtr grad, float* m, float* v, Ptr working,
                 int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::AdamWUpdate(context.StreamOf(lane, "AdamWUpdate"), params, step, param, grad, m, v,
                       working, n);
}

}  // namespace op_kernels
}  // namespace cuda
}  // namespace tandem
