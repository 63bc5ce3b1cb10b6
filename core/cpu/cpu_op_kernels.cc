// The CPU backend's kernels of the op table (core/op_table.h): each runs at
// once on the calling thread, split over the intra-op threads. float32
// kernels read and write the operands in place; a bfloat16 operand is
// widened into a float32 copy (In) or computed in one and rounded once at
// the end (Out). GEMMs go to oneDNN or Eigen (core/cpu/cpu_gemm.h).
#include "core/cpu/cpu_op_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/cpu/cpu_attention.h"
#include "core/cpu/cpu_batched_gemm.h"
#include "core/cpu/cpu_column_sums.h"
#include "core/cpu/cpu_gemm_bf16.h"
#include "core/cpu/cpu_layer_norm.h"
#include "core/cpu/cpu_math.h"
#include "core/cpu/cpu_math_ops.h"
#include "core/cpu/cpu_threads.h"
#include "core/cpu/scratch.h"
#include "core/kernel_math.h"
#include "core/op_table.h"

namespace tandem {
namespace cpu {

GemmLibrary KernelGemmLibrary() {
  static const GemmLibrary library = GemmLibraryFromEnvironment();
  return library;
}

namespace {

ThreadPool& KernelPool() {
  static ThreadPool pool;
  return pool;
}

}  // namespace

IntraOp KernelIntra() { return IntraOp{&KernelPool(), CpuThreads()}; }

namespace {

// What one op may use of the intra-op threads.
IntraOp intra() { return KernelIntra(); }

// Dropout masks cost a hash per element: smaller pieces.
constexpr int64_t kDropoutGrain = int64_t{1} << 13;

void Widen(const IntraOp& intra, const uint16_t* bits, float* out, int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    WidenBFloat16(bits + begin, out + begin, end - begin);
  });
}

void Round(const IntraOp& intra, const float* in, uint16_t* bits, int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    RoundToBFloat16(in + begin, bits + begin, end - begin);
  });
}

// A float32 view of an operand the op reads: the memory itself for float32,
// a widened copy for bfloat16.
class In {
 public:
  In(const IntraOp& intra, CPtr p, int64_t n) {
    if (p.dtype == DType::kFloat32 || p.data == nullptr) {
      ptr_ = static_cast<const float*>(p.data);
      return;
    }
    copy_.emplace(n);
    Widen(intra, static_cast<const uint16_t*>(p.data), copy_->data(), n);
    ptr_ = copy_->data();
  }
  const float* get() const { return ptr_; }

 private:
  std::optional<Scratch> copy_;
  const float* ptr_ = nullptr;
};

// A float32 view of an operand the op writes (and, with `read`, reads
// first): for bfloat16 a float32 copy, rounded into the operand at the end
// of the view's scope, once.
class Out {
 public:
  Out(const IntraOp& intra, Ptr p, int64_t n, bool read) : intra_(intra), p_(p), n_(n) {
    if (p.dtype == DType::kFloat32 || p.data == nullptr) {
      ptr_ = static_cast<float*>(p.data);
      return;
    }
    copy_.emplace(n);
    if (read) Widen(intra, static_cast<const uint16_t*>(p.data), copy_->data(), n);
    ptr_ = copy_->data();
  }
  ~Out() {
    if (copy_) Round(intra_, copy_->data(), static_cast<uint16_t*>(p_.data), n_);
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  float* get() { return ptr_; }

 private:
  IntraOp intra_;
  Ptr p_;
  int64_t n_;
  std::optional<Scratch> copy_;
  float* ptr_ = nullptr;
};

}  // namespace

namespace op_kernels {

void Gemm(const Lane&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, CPtr a, CPtr b, float beta, CPtr c, Ptr d,
          const GemmSpec& spec) {
  if (m <= 0 || n <= 0) return;
  const bool reads_c = beta != 0.f;
  Out out(intra(), d, m * n, reads_c && c.data == d.data);
  if (reads_c && c.data != d.data) {
    In from(intra(), c, m * n);
    std::copy(from.get(), from.get() + m * n, out.get());
  }
  if (a.dtype == DType::kBFloat16 && b.dtype == DType::kBFloat16) {
    // Note [bfloat16 GEMMs on the CPU] in cpu_gemm_bf16.h.
    cpu::GemmBf16(KernelGemmLibrary(), KernelPool(), intra().threads, trans_a, trans_b, m, n, k,
                  alpha, static_cast<const uint16_t*>(a.data),
                  static_cast<const uint16_t*>(b.data), beta, out.get());
  } else {
    cpu::Gemm(KernelGemmLibrary(), KernelPool(), intra().threads, trans_a, trans_b, m, n, k, alpha,
              static_cast<const float*>(a.data), static_cast<const float*>(b.data), beta,
              out.get());
  }
  if (spec.bias.data != nullptr) {
    In bias(intra(), spec.bias, n);
    math::BiasActivation(intra(), spec.activation, out.get(), bias.get(), nullptr, out.get(),
                         m, n);
  } else if (spec.activation != Activation::kIdentity) {
    math::ActivationForward(intra(), spec.activation, out.get(), out.get(), m * n);
  }
}

void BiasActivation(const Lane&, Activation activation, CPtr x, CPtr bias, Ptr pre,
                    Ptr out, int64_t rows, int64_t cols) {
  In X(intra(), x, rows * cols), B(intra(), bias, cols);
  Out P(intra(), pre, rows * cols, false), O(intra(), out, rows * cols, false);
  math::BiasActivation(intra(), activation, X.get(), B.get(), P.get(), O.get(), rows, cols);
}

void ColumnSums(const Lane&, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, Ptr out) {
  Out O(intra(), out, cols, beta != 0.f);
  cpu::ColumnSums(intra(), x, rows, cols, alpha, beta, O.get());
}

void ActivationBackwardColumnSums(const Lane&, Activation activation, CPtr x, CPtr dy, Ptr dz,
                                  int64_t rows, int64_t cols, float beta,
                                  Ptr sums) {
  Out S(intra(), sums, cols, beta != 0.f);
  cpu::ActivationBackwardColumnSums(intra(), activation, x, dy, dz, rows, cols, beta,
                                    S.get());
}

void Binary(const Lane&, BinaryOp op, CPtr a, CPtr b, Ptr out, int64_t n) {
  In A(intra(), a, n), B(intra(), b, n);
  Out O(intra(), out, n, false);
  math::Binary(intra(), op, A.get(), B.get(), O.get(), n);
}

void Axpy(const Lane&, float alpha, CPtr x, Ptr y, int64_t n) {
  In X(intra(), x, n);
  Out Y(intra(), y, n, true);
  math::Axpy(intra(), alpha, X.get(), Y.get(), n);
}

void Scale(const Lane&, float alpha, Ptr x, int64_t n) {
  Out X(intra(), x, n, true);
  math::Scale(intra(), alpha, X.get(), n);
}

void Fill(const Lane&, float value, Ptr x, int64_t n) {
  Out X(intra(), x, n, false);
  math::Fill(intra(), value, X.get(), n);
}

void Cast(const Lane&, CPtr src, Ptr dst, int64_t n) {
  if (src.dtype == DType::kFloat32 && dst.dtype == DType::kBFloat16) {
    return Round(intra(), static_cast<const float*>(src.data), static_cast<uint16_t*>(dst.data),
                 n);
  }
  if (src.dtype == DType::kBFloat16 && dst.dtype == DType::kFloat32) {
    return Widen(intra(), static_cast<const uint16_t*>(src.data), static_cast<float*>(dst.data),
                 n);
  }
  In S(intra(), src, n);
  Out D(intra(), dst, n, false);
  math::Copy(intra(), S.get(), D.get(), n);
}

void ActivationForward(const Lane&, Activation activation, CPtr x, Ptr y,
                       int64_t n) {
  In X(intra(), x, n);
  Out Y(intra(), y, n, false);
  math::ActivationForward(intra(), activation, X.get(), Y.get(), n);
}

void ActivationBackward(const Lane&, Activation activation, CPtr x, CPtr dy, Ptr dx,
                        int64_t n, bool accumulate) {
  In X(intra(), x, n), DY(intra(), dy, n);
  Out DX(intra(), dx, n, accumulate);
  math::ActivationBackward(intra(), activation, X.get(), DY.get(), DX.get(), n, accumulate);
}

void SoftmaxCrossEntropy(const Lane&, CPtr logits, const float* labels, int64_t rows,
                         int64_t classes, float normalizer, float* loss,
                         Ptr dlogits) {
  In L(intra(), logits, rows * classes);
  Out D(intra(), dlogits, rows * classes, false);
  math::SoftmaxCrossEntropy(intra(), L.get(), labels, rows, classes, normalizer, loss, D.get());
}

void Mse(const Lane&, CPtr pred, CPtr target, int64_t n, float normalizer,
         float* loss, Ptr dpred) {
  In P(intra(), pred, n), T(intra(), target, n);
  Out D(intra(), dpred, n, false);
  math::Mse(intra(), P.get(), T.get(), n, normalizer, loss, D.get());
}

void Argmax(const Lane&, CPtr x, int64_t rows, int64_t cols, float* out) {
  In X(intra(), x, rows * cols);
  math::Argmax(X.get(), rows, cols, out);
}

void CountCorrect(const Lane&, CPtr logits, const float* labels, int64_t rows,
                  int64_t classes, float* out) {
  In L(intra(), logits, rows * classes);
  math::CountCorrect(L.get(), labels, rows, classes, out);
}

void DropoutMask(const Lane&, float p, uint64_t seed, uint64_t offset, Ptr mask,
                 int64_t n) {
  Out M(intra(), mask, n, false);
  float* m = M.get();
  intra().ForRanges(n, kDropoutGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) m[i] = kernel_math::DropoutScale(p, seed, offset + i);
  });
}

void TrackNonFinite(const Lane&, const float* loss, int64_t step,
                    float* first_bad) {
  if (!std::isfinite(loss[0]) && first_bad[0] < 0.f) {
    first_bad[0] = static_cast<float>(step);
  }
}

void SgdUpdate(const Lane&, const SgdParams& params, float* param, CPtr grad,
               float* velocity, Ptr working, int64_t n) {
  In G(intra(), grad, n);
  math::SgdUpdate(intra(), params, param, G.get(), velocity, n, working);
}

void AdamWUpdate(const Lane&, const AdamWParams& params, int64_t step, float* param,
                 CPtr grad, float* m, float* v, Ptr working, int64_t n) {
  In G(intra(), grad, n);
  math::AdamWUpdate(intra(), params, step, param, G.get(), m, v, n, working);
}

// ---- The math of core/ops_math.h (core/cpu/cpu_math_ops.h).

void Unary(const Lane&, UnaryOp op, CPtr x, Ptr out, int64_t n) {
  In X(intra(), x, n);
  Out O(intra(), out, n, false);
  math::Unary(intra(), op, X.get(), O.get(), n);
}

void BinaryScalar(const Lane&, BinaryOp op, CPtr x, float s, Ptr out, int64_t n) {
  In X(intra(), x, n);
  Out O(intra(), out, n, false);
  math::BinaryScalar(intra(), op, X.get(), s, O.get(), n);
}

void BroadcastBinary(const Lane&, BinaryOp op, Broadcast how, CPtr x, CPtr v, Ptr out,
                     int64_t rows, int64_t cols) {
  In X(intra(), x, rows * cols), V(intra(), v, how == Broadcast::kRow ? cols : rows);
  Out O(intra(), out, rows * cols, false);
  math::BroadcastBinary(intra(), op, how, X.get(), V.get(), O.get(), rows, cols);
}

void RowReduce(const Lane&, RowReduction op, CPtr x, int64_t rows, int64_t cols,
               Ptr out) {
  In X(intra(), x, rows * cols);
  Out O(intra(), out, rows, false);
  math::RowReduce(intra(), op, X.get(), rows, cols, O.get());
}

void Softmax(const Lane&, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  In X(intra(), x, rows * cols);
  Out O(intra(), out, rows * cols, false);
  math::Softmax(intra(), X.get(), O.get(), rows, cols);
}

void Transpose(const Lane&, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  math::Transpose(x.data, out.data, rows, cols, SizeOf(x.dtype));
}

void GatherRows(const Lane&, CPtr table, int64_t table_rows, const float* indices,
                int64_t n, int64_t cols, Ptr out) {
  math::CheckRowIndices("GatherRows", indices, n, table_rows);
  math::GatherRows(table.data, indices, n, cols, SizeOf(table.dtype), out.data);
}

void ScatterAddRows(const Lane&, CPtr src, const float* indices, int64_t n, int64_t cols,
                    Ptr table, int64_t table_rows) {
  math::CheckRowIndices("ScatterAddRows", indices, n, table_rows);
  In S(intra(), src, n * cols);
  math::ScatterAddRows(S.get(), indices, n, cols, table);
}

// ---- Layer normalisation (core/cpu/cpu_layer_norm.h).

void LayerNormForward(const Lane&, CPtr x, CPtr weight, CPtr bias, float eps, int64_t rows,
                      int64_t cols, Ptr y, float* mean, float* rstd) {
  In X(intra(), x, rows * cols), W(intra(), weight, cols), B(intra(), bias, cols);
  Out Y(intra(), y, rows * cols, false);
  math::LayerNormForward(intra(), X.get(), W.get(), B.get(), eps, rows, cols, Y.get(), mean,
                         rstd);
}

void LayerNormBackward(const Lane&, CPtr x, CPtr dy, CPtr weight, const float* mean,
                       const float* rstd, int64_t rows, int64_t cols, Ptr dx,
                       float* dweight, float* dbias) {
  In X(intra(), x, rows * cols), G(intra(), dy, rows * cols), W(intra(), weight, cols);
  Out DX(intra(), dx, rows * cols, false);
  math::LayerNormBackward(intra(), X.get(), G.get(), W.get(), mean, rstd, rows, cols,
                          DX.get(), dweight, dbias);
}

// ---- Attention (core/cpu/cpu_batched_gemm.h, core/cpu/cpu_attention.h).

void BatchedGemm(const Lane&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, CPtr a, CPtr b, float beta, Ptr c, const GemmBatch& batch,
                 bool) {
  const int64_t size = batch.count * m * n;
  Out out(intra(), c, size, beta != 0.f);
  const GemmStrides strides{batch.count, batch.stride_a, batch.stride_b};
  if (a.dtype == DType::kBFloat16) {
    // Note [Batched GEMMs on the CPU] in cpu_batched_gemm.h.
    cpu::BatchedGemmBf16(KernelGemmLibrary(), KernelPool(), intra().threads, trans_a, trans_b, m,
                         n, k, alpha, static_cast<const uint16_t*>(a.data),
                         static_cast<const uint16_t*>(b.data), beta, out.get(), strides);
  } else {
    cpu::BatchedGemm(KernelGemmLibrary(), KernelPool(), intra().threads, trans_a, trans_b, m, n, k,
                     alpha, static_cast<const float*>(a.data),
                     static_cast<const float*>(b.data), beta, out.get(), strides);
  }
}

void CausalSoftmax(const Lane&, CPtr x, Ptr out, int64_t batch, int64_t t,
                   float scale) {
  In X(intra(), x, batch * t * t);
  Out O(intra(), out, batch * t * t, false);
  math::CausalSoftmax(intra(), X.get(), O.get(), batch, t, scale);
}

void CausalSoftmaxBackward(const Lane&, CPtr y, CPtr dy, Ptr dx, int64_t batch, int64_t t,
                           float scale) {
  const int64_t n = batch * t * t;
  In Y(intra(), y, n), DY(intra(), dy, n);
  Out DX(intra(), dx, n, false);
  math::CausalSoftmaxBackward(intra(), Y.get(), DY.get(), DX.get(), batch, t, scale);
}

void TransposeBatched(const Lane&, CPtr x, Ptr out, int64_t batch, int64_t rows,
                      int64_t cols) {
  math::TransposeBatched(intra(), x.data, out.data, batch, rows, cols, SizeOf(x.dtype));
}

void Permute(const Lane&, CPtr x, Ptr out, const PermuteSpec& spec) {
  math::Permute(intra(), x.data, out.data, spec, SizeOf(x.dtype));
}

void MaskedFill(const Lane&, CPtr x, const float* mask, int64_t n, int64_t mask_n, float fill,
                Ptr out) {
  uint32_t bits = FloatToBFloat16Bits(fill);
  if (x.dtype == DType::kFloat32) std::memcpy(&bits, &fill, sizeof(bits));
  math::MaskedFill(intra(), x.data, mask, n, mask_n, bits, out.data, SizeOf(x.dtype));
}

}  // namespace op_kernels
}  // namespace cpu
}  // namespace tandem
