// The op table: every op of the backends, declared once.
//
// Each line of TANDEM_BACKEND_OPS names an op, the dtype rule of its tensor
// operands, its aliasing rule, and its arguments after the lane. From that
// one line follow:
//   - the kernel each backend defines, with that signature:
//     cpu::op_kernels::<Name> (core/cpu/) and cuda::op_kernels::<Name>
//     (core/cuda/, built where CUDA is);
//   - the dispatcher dispatch::<Name>(lane, args...) (core/dispatch.h),
//     which checks the operands against the rules (below) and calls the
//     kernel of the lane's device: the public wrappers (core/ops*.h) call it
//     after their shape checks;
//   - the op's entry in OpTable() (core/dispatch.h), which
//     tests/core:op_table_test walks: it fails for an op without a
//     CPU-vs-CUDA case.
//
// Adding an op (docs/architecture.md, "Adding an op"): its line here, its
// CPU kernel, its CUDA kernel, its public wrapper, its parity case.
//
//   dispatch::Unary(lane, UnaryOp::kExp, x.ptr(), out.mutable_ptr(), x.numel());
//
// Operands are CPtr (read) and Ptr (written) of the lane's device; raw
// float pointers are float32; the other arguments are sizes and options.
// The rules checked at every call, from the CPtr and Ptr arguments whose
// data is not null:
//   OpDTypes::kSame   every operand has one dtype;
//   OpDTypes::kEach   each operand may have either dtype (the op's comment
//                     in core/backend.h says which go together).
//   OpAliasing::kNone       no written operand is a read one;
//   OpAliasing::kFirstInput a written operand may be the first read one
//                           (in place), no other;
//   OpAliasing::kAnyInput   a written operand may be any read one.
// Only exact aliasing is checked (the same address); a partial overlap is
// the caller's error, as every op's comment says.
#ifndef TANDEM_CORE_OP_TABLE_H_
#define TANDEM_CORE_OP_TABLE_H_

#include <cstdint>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/lane.h"

namespace tandem {

enum class OpDTypes { kSame, kEach };
enum class OpAliasing { kNone, kFirstInput, kAnyInput };

// What the table says of one op (what it computes is below).
struct OpInfo {
  const char* name;
  OpDTypes dtypes;
  OpAliasing aliasing;
};

// What each op computes, in the order of the table. Layout: row-major,
// contiguous.
//
// Gemm: D[m, n] = act(alpha op(A) op(B) + beta C + bias), where op(A) is [m, k] and op(B) is [k,
//   n]; A is stored [m, k] or, transposed, [k, m]. C may be D (in place) and is not read when
//   beta is 0. A and B share a dtype, C and D share one (float32 or bfloat16, accumulation in
//   float32 either way). The CPU backend computes in float32 and rounds the result once; the CUDA
//   backend calls cuBLAS or cuBLASLt (bias and ReLU in the epilogue).
// BiasActivation: pre[r, c] = x[r, c] + bias[c] (skipped when pre.data is null) and out[r, c] =
//   act(x[r, c] + bias[c]), in one pass; x may equal pre or out.
// ColumnSums: out[c] = beta * out[c] + alpha * sum_r x[r, c], summed in float32.
// Binary: out = a op b, element-wise (kDiv: an IEEE division); a, b and out of one dtype; out may
//   be a or b.
// Axpy: y += alpha * x.
// Scale: x *= alpha.
// Fill: x[i] = value (in x's dtype).
// Cast: dst = src converted to dst's dtype (rounded to nearest even).
// ActivationForward: y = act(x), element-wise.
// ActivationBackward: dx = dy * act'(x) when accumulate is false, dx += dy * act'(x) otherwise.
// ActivationBackwardColumnSums: dz = dy * act'(x) and sums[c] = beta * sums[c] + sum_r dz[r, c]
//   (dz as stored), over [rows, cols]: ActivationBackward then ColumnSums, which a backend may do
//   in one pass (the CUDA backend does) with the same results.
// SoftmaxCrossEntropy: loss[0] = sum_r -log softmax(logits[r])[labels[r]] / normalizer; dlogits
//   (if data is not null) = (softmax - onehot) / normalizer. Labels are class indices stored as
//   floats; loss and softmax in float32.
// Mse: loss[0] = sum (pred - target)^2 / normalizer, summed in double in an order that depends
//   on n alone; target with null data is zeros (a sum of squares); dpred (if data is not null) =
//   2 (pred - target) / normalizer.
// Argmax: out[r] = index of the first maximum of x[r, :].
// CountCorrect: out[0] = number of rows whose argmax equals the label.
// DropoutMask: mask[i] = 0 with probability p, else 1 / (1 - p); bits from HashU64(seed, offset +
//   i), so CPU and CUDA draw the same mask.
// TrackNonFinite: if loss[0] is NaN or infinite and first_bad[0] < 0, sets first_bad[0] = step: a
//   sticky record of the first non-finite loss that the host reads only now and then, so checking
//   costs no synchronisation per step.
// SgdUpdate, AdamWUpdate: parameter updates, in one pass over a (possibly flat) float32
//   buffer, from a float32 or bfloat16 gradient. velocity may be null when momentum is 0.
//   `working` (data null: none) receives the updated parameters in its dtype in the same pass:
//   the bfloat16 copy that mixed-precision layers compute with.
//   AdamWUpdate's `step` counts from 1 (bias correction).
//
// The math for custom layers (core/ops_math.h), Unary to ScatterAddRows: arithmetic in
// float32, each result rounded once into its operand's dtype; sums keep float32 accumulators.
// Each queues on `lane` only, with no scratch memory and no host wait, so any lane may run it.
// Unary: out = op(x), element-wise; x and out of one dtype; out may be x.
// BinaryScalar: out = x op s, element-wise (kMul: x * s); x and out of one dtype; out may be x.
// BroadcastBinary: out[r, c] = x[r, c] op v[c] (Broadcast::kRow) or x[r, c] op v[r]
//   (Broadcast::kColumn); x, v and out of one dtype; out may be x, not v.
// RowReduce: out[r] = the reduction of x[r, :] (cols > 0): the sum, the mean, the maximum (NaN if
//   the row holds a NaN; kernel_math::MaxOrNan) or the population variance (mean of squared
//   deviations from the mean, two passes). float32 accumulators; x and out each of either dtype.
// Softmax: out[r, :] = softmax(x[r, :]) = exp(x - max) / sum exp(x - max), in float32 (cols > 0);
//   x and out of one dtype; out may be x.
// Transpose: out [cols, rows] = x [rows, cols] transposed; one dtype; no overlap.
// GatherRows: out[i, :] = table[indices[i], :] for i < n; table [table_rows, cols] and out [n,
//   cols] of one dtype; indices float32 whole numbers. The CPU throws for an index that is not a
//   row of the table, before writing anything; a GPU fills that row of out with NaN.
// ScatterAddRows: table[indices[i], :] += src[i, :] for i < n, each table row summed in float32
//   in the order of i (table row first) and rounded once: deterministic, the same bits on both
//   backends. src [n, cols] and table [table_rows, cols] each of either dtype. The CPU throws for
//   a bad index before writing anything; a GPU skips that position.
// LayerNormForward: per row of x [rows, cols] (cols > 0): mean[r] and the population variance
//   var[r] of x[r, :] in float32 (two passes), rstd[r] = 1 / sqrt(var[r] + eps), and y[r, c] =
//   (x[r, c] - mean[r]) * rstd[r] * weight[c] + bias[c], rounded once. x, weight [cols], bias
//   [cols] and y of one dtype; mean and rstd float32 [rows]; y apart from x. Queued on `lane`
//   only, no scratch memory, no host wait.
// LayerNormBackward: the gradients of LayerNormForward from dy [rows, cols], with xhat = (x -
//   mean) rstd and g = dy * weight: dx[r, :] = rstd[r] (g - mean(g) - xhat mean(g xhat)), written
//   (skipped when dx.data is null); dweight[c] += sum_r dy xhat and dbias[c] += sum_r dy, float32
//   [cols], added (each skipped when null). x, dy, weight and dx of one dtype; sums in float32,
//   in an order fixed by the shape. Queued on `lane` only.
// BatchedGemm: for each product b of `batch`: C[b] = alpha op(A[b]) op(B[b]) + beta C[b], shapes
//   and transposes as Gemm's (op(A[b]) [m, k], op(B[b]) [k, n], C[b] [m, n]); C is read only when
//   beta is not 0. A and B share a dtype; C float32, or bfloat16 beside bfloat16 operands;
//   float32 accumulation, the result rounded once, except on CUDA for a bfloat16 C with beta !=
//   0, where cuBLAS may add partial products into C in bfloat16, whatever the handle's math mode:
//   each such rounding errs by up to 1/256 of the partial sum, so where the terms cancel the
//   result may be off by many units in its own last place; pass a float32 C where that matters.
//   `tf32`: float32 operands may use TF32 tensor cores (as GemmSpec::tf32). C overlaps neither A
//   nor B.
// CausalSoftmax: over `batch` matrices [t, t] of x (t > 0), row i of each seeing only its columns
//   j <= i: out[i, j] = exp(scale x[i, j] - max) / sum over j' <= i, with max the maximum of
//   scale x[i, j'] over j' <= i, and out[i, j] = 0 exactly for j > i. float32 arithmetic; x and
//   out of one dtype; out may be x.
// CausalSoftmaxBackward: The gradient of CausalSoftmax from its output y and dy (same layout):
//   dx[i, j] = scale y[i, j] (dy[i, j] - sum over j' <= i of dy[i, j'] y[i, j']) for j <= i, 0
//   exactly for j > i. One dtype; dx may be dy or y.
// TransposeBatched: out[b] [cols, rows] = x[b] [rows, cols] transposed, for each of `batch`
//   matrices; one dtype; no overlap.
// Permute: out = x with its dimensions reordered (PermuteSpec); one dtype; no overlap; every
//   dimension of at least 1 element.
// MaskedFill: out[i] = fill (in out's dtype) where mask[i % mask_n] is not 0, else x[i], for i <
//   n; x and out of one dtype; out may be x, not mask.

// X(Name, dtype rule, aliasing rule, (arguments after the lane)).
// clang-format off
#define TANDEM_BACKEND_OPS(X)                                                                    \
  /* GEMMs and their epilogues (core/ops.h) */                                                   \
  X(Gemm, kEach, kAnyInput, (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,        \
                             float alpha, CPtr a, CPtr b, float beta, CPtr c, Ptr d,             \
                             const GemmSpec& spec))                                              \
  X(BiasActivation, kEach, kFirstInput, (Activation activation, CPtr x, CPtr bias, Ptr pre,      \
                                         Ptr out, int64_t rows, int64_t cols))                   \
  X(ColumnSums, kEach, kNone, (CPtr x, int64_t rows, int64_t cols, float alpha, float beta,      \
                               Ptr out))                                                         \
  X(ActivationForward, kEach, kAnyInput, (Activation activation, CPtr x, Ptr y, int64_t n))      \
  X(ActivationBackward, kEach, kAnyInput, (Activation activation, CPtr x, CPtr dy, Ptr dx,       \
                                           int64_t n, bool accumulate))                          \
  X(ActivationBackwardColumnSums, kEach, kAnyInput, (Activation activation, CPtr x, CPtr dy,     \
                                                     Ptr dz, int64_t rows, int64_t cols,         \
                                                     float beta, Ptr sums))                      \
  /* Element-wise arithmetic, fills and casts (core/ops.h) */                                    \
  X(Binary, kSame, kAnyInput, (BinaryOp op, CPtr a, CPtr b, Ptr out, int64_t n))                 \
  X(Axpy, kEach, kAnyInput, (float alpha, CPtr x, Ptr y, int64_t n))                             \
  X(Scale, kEach, kNone, (float alpha, Ptr x, int64_t n))                                        \
  X(Fill, kEach, kNone, (float value, Ptr x, int64_t n))                                         \
  X(Cast, kEach, kNone, (CPtr src, Ptr dst, int64_t n))                                          \
  /* Losses, metrics, dropout, the non-finite watch (core/ops.h) */                              \
  X(SoftmaxCrossEntropy, kEach, kNone, (CPtr logits, const float* labels, int64_t rows,          \
                                        int64_t classes, float normalizer, float* loss,          \
                                        Ptr dlogits))                                            \
  X(Mse, kEach, kNone, (CPtr pred, CPtr target, int64_t n, float normalizer, float* loss,        \
                        Ptr dpred))                                                              \
  X(Argmax, kEach, kNone, (CPtr x, int64_t rows, int64_t cols, float* out))                      \
  X(CountCorrect, kEach, kNone, (CPtr logits, const float* labels, int64_t rows,                 \
                                 int64_t classes, float* out))                                   \
  X(DropoutMask, kEach, kNone, (float p, uint64_t seed, uint64_t offset, Ptr mask, int64_t n))   \
  X(TrackNonFinite, kEach, kNone, (const float* loss, int64_t step, float* first_bad))           \
  /* Optimizer updates (core/ops.h) */                                                           \
  X(SgdUpdate, kEach, kNone, (const SgdParams& params, float* param, CPtr grad,                  \
                              float* velocity, Ptr working, int64_t n))                          \
  X(AdamWUpdate, kEach, kNone, (const AdamWParams& params, int64_t step, float* param,           \
                                CPtr grad, float* m, float* v, Ptr working, int64_t n))          \
  /* The math for custom layers (core/ops_math.h) */                                             \
  X(Unary, kSame, kAnyInput, (UnaryOp op, CPtr x, Ptr out, int64_t n))                           \
  X(BinaryScalar, kSame, kAnyInput, (BinaryOp op, CPtr x, float s, Ptr out, int64_t n))          \
  X(BroadcastBinary, kSame, kFirstInput, (BinaryOp op, Broadcast how, CPtr x, CPtr v, Ptr out,   \
                                          int64_t rows, int64_t cols))                           \
  X(RowReduce, kEach, kNone, (RowReduction op, CPtr x, int64_t rows, int64_t cols, Ptr out))     \
  X(Softmax, kSame, kAnyInput, (CPtr x, Ptr out, int64_t rows, int64_t cols))                    \
  X(Transpose, kSame, kNone, (CPtr x, Ptr out, int64_t rows, int64_t cols))                      \
  X(GatherRows, kSame, kNone, (CPtr table, int64_t table_rows, const float* indices, int64_t n,  \
                               int64_t cols, Ptr out))                                           \
  X(ScatterAddRows, kEach, kNone, (CPtr src, const float* indices, int64_t n, int64_t cols,      \
                                   Ptr table, int64_t table_rows))                               \
  /* Layer normalisation (core/ops_layer_norm.h) */                                              \
  X(LayerNormForward, kSame, kNone, (CPtr x, CPtr weight, CPtr bias, float eps, int64_t rows,    \
                                     int64_t cols, Ptr y, float* mean, float* rstd))             \
  X(LayerNormBackward, kSame, kNone, (CPtr x, CPtr dy, CPtr weight, const float* mean,           \
                                      const float* rstd, int64_t rows, int64_t cols, Ptr dx,     \
                                      float* dweight, float* dbias))                             \
  /* Attention (core/ops_attention.h) */                                                         \
  X(BatchedGemm, kEach, kNone, (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,     \
                                float alpha, CPtr a, CPtr b, float beta, Ptr c,                  \
                                const GemmBatch& batch, bool tf32))                              \
  X(CausalSoftmax, kSame, kAnyInput, (CPtr x, Ptr out, int64_t batch, int64_t t, float scale))   \
  X(CausalSoftmaxBackward, kSame, kAnyInput, (CPtr y, CPtr dy, Ptr dx, int64_t batch,            \
                                              int64_t t, float scale))                           \
  X(TransposeBatched, kSame, kNone, (CPtr x, Ptr out, int64_t batch, int64_t rows,               \
                                     int64_t cols))                                              \
  X(Permute, kSame, kNone, (CPtr x, Ptr out, const PermuteSpec& spec))                           \
  X(MaskedFill, kSame, kFirstInput, (CPtr x, const float* mask, int64_t n, int64_t mask_n,       \
                                     float fill, Ptr out))
// clang-format on

// (a, b) -> (const Lane& lane, a, b): a kernel's parameter list.
#define TANDEM_OP_KERNEL_PARAMS(...) (const Lane& lane, __VA_ARGS__)
#define TANDEM_DECLARE_OP_KERNEL(name, dtypes, aliasing, params) \
  void name TANDEM_OP_KERNEL_PARAMS params;

namespace cpu {
namespace op_kernels {
TANDEM_BACKEND_OPS(TANDEM_DECLARE_OP_KERNEL)
}  // namespace op_kernels
}  // namespace cpu

namespace cuda {
namespace op_kernels {
TANDEM_BACKEND_OPS(TANDEM_DECLARE_OP_KERNEL)
}  // namespace op_kernels
}  // namespace cuda

}  // namespace tandem

#endif  // TANDEM_CORE_OP_TABLE_H_
