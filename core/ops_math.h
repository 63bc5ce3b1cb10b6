// The math ops that custom layers are written with: element-wise functions,
// division, scalars, broadcasts over rows and columns, row reductions,
// softmax, transpose, and gathering and scatter-adding rows by index. Part
// of the public op set: `#include "core/ops.h"` brings them in. Like every
// op (core/ops.h), each checks its operands and runs on a lane of their
// device, or on the main lane of its output's device when the call names
// none; each runs wholly on the device, with no host wait.
//
//   // A layer norm of x [rows, cols], as a custom layer would write it:
//   ops::RowMean(x, mean);                                  // [rows]
//   ops::BroadcastSub(x, mean, Broadcast::kColumn, xc);     // x - mean[r]
//   ops::RowVariance(x, var);                               // population
//   ops::AddScalar(var, 1e-5f, var);
//   ops::Rsqrt(var, var);                                   // 1 / sqrt(var + eps)
//   ops::BroadcastMul(xc, var, Broadcast::kColumn, y);
//   ops::BroadcastMul(y, gamma, Broadcast::kRow, y);        // gamma [cols]
//   ops::BroadcastAdd(y, beta, Broadcast::kRow, y);
//
// Dtypes: float32 or bfloat16, the same for the operands each op names;
// arithmetic runs in float32 and each result is rounded once into its
// output's dtype; reductions and softmax keep float32 accumulators. Indices
// are float32 tensors of whole numbers, as the labels of the losses are:
// exact up to 2^24, so a table has at most 16777216 rows.
//
// Aliasing: each op says whether its output may be an input. "out may be
// x" means the very same elements (the same tensor, or a view of the same
// memory and shape); an output that partly overlaps an input is refused
// with an error naming both.
#ifndef TANDEM_CORE_OPS_MATH_H_
#define TANDEM_CORE_OPS_MATH_H_

#include "core/backend.h"
#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace ops {

// ---- Element-wise: out = f(x), x and out of one dtype and size; out may be x.

void Exp(const Lane& lane, const Tensor& x, Tensor& out);
// Natural logarithm: -inf at 0, NaN below.
void Log(const Lane& lane, const Tensor& x, Tensor& out);
void Sqrt(const Lane& lane, const Tensor& x, Tensor& out);
// 1 / sqrt(x), as a division (not an approximation): +inf at 0.
void Rsqrt(const Lane& lane, const Tensor& x, Tensor& out);
// 1 / x: +-inf at +-0.
void Reciprocal(const Lane& lane, const Tensor& x, Tensor& out);
// out = a / b (IEEE: x / 0 is +-inf, 0 / 0 NaN); a, b and out of one dtype
// and size, as Add, Sub and Mul; out may be a or b.
void Div(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out);
// out = x + s; out may be x.
void AddScalar(const Lane& lane, const Tensor& x, float s, Tensor& out);
// out = s * x; out may be x (ops::Scale is the in-place form).
void MulScalar(const Lane& lane, const Tensor& x, float s, Tensor& out);

// ---- Broadcasts: out [rows, cols] = x [rows, cols] op v, where v is [cols]
// laid along every row (Broadcast::kRow: op v[c]) or [rows] laid along
// every column (Broadcast::kColumn: op v[r]). x, v and out of one dtype; out
// may be x but must not overlap v.

void BroadcastAdd(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out);
void BroadcastSub(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out);
void BroadcastMul(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out);
void BroadcastDiv(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out);

// ---- Row reductions: out [rows] from each row of x [rows, cols], with
// float32 accumulators; x and out each of either dtype; out must not
// overlap x. Deterministic: a rerun gives the same bits.

// An empty row sums to 0.
void RowSum(const Lane& lane, const Tensor& x, Tensor& out);
// cols > 0.
void RowMean(const Lane& lane, const Tensor& x, Tensor& out);
// cols > 0. NaN if the row holds a NaN.
void RowMax(const Lane& lane, const Tensor& x, Tensor& out);
// The population variance, sum (x - mean)^2 / cols (not cols - 1), in two
// passes (the mean first), so a large mean costs no precision. cols > 0.
void RowVariance(const Lane& lane, const Tensor& x, Tensor& out);

// out [rows, cols] = softmax of each row of x: exp(x - max) / sum exp(x -
// max), in float32, so large inputs do not overflow. Entries of -inf get
// probability 0 (a mask); a row whose maximum is not finite (all -inf, or
// holding +inf or NaN) gives NaN. x and out of one dtype; out may be x.
// cols > 0.
void Softmax(const Lane& lane, const Tensor& x, Tensor& out);

// out [cols, rows] = x [rows, cols] transposed; one dtype; out must not
// overlap x.
void Transpose(const Lane& lane, const Tensor& x, Tensor& out);

// out [n, cols] = rows indices[0..n) of table [table_rows, cols]: out[i, :]
// = table[indices[i], :], copied bit for bit. indices: float32, n elements,
// whole numbers in [0, table_rows). out of table's dtype, overlapping
// neither. A bad index throws on the CPU, naming its position and value,
// before anything is written; on a GPU (where a kernel cannot throw) that
// row of out is NaN, which the loss then shows (TrackNonFinite).
void GatherRows(const Lane& lane, const Tensor& table, const Tensor& indices,
                Tensor& out);
// table[indices[i], :] += src[i, :] for every i, repeated indices adding
// up: the backward of GatherRows. Each touched table row is summed in
// float32 in the order of i, starting from its old value, and rounded once,
// so the result is deterministic and the same bits on CPU and GPU. src [n,
// cols] and table [table_rows, cols] each of either dtype; indices as for
// GatherRows; table must not overlap src or indices. A bad index throws on
// the CPU before anything is written; a GPU skips its row of src. On a GPU
// each distinct index is summed by one block (per 256 columns), which finds
// its rows by scanning the indices, with no float atomics: O(n^2) index
// comparisons in all, fine for batch-sized index lists.
void ScatterAddRows(const Lane& lane, const Tensor& src, const Tensor& indices,
                    Tensor& table);

// ---- The same ops on the main lane of their output's device.

inline void Exp(const Tensor& x, Tensor& out) { Exp(out.backend().main_lane(), x, out); }
inline void Log(const Tensor& x, Tensor& out) { Log(out.backend().main_lane(), x, out); }
inline void Sqrt(const Tensor& x, Tensor& out) { Sqrt(out.backend().main_lane(), x, out); }
inline void Rsqrt(const Tensor& x, Tensor& out) { Rsqrt(out.backend().main_lane(), x, out); }
inline void Reciprocal(const Tensor& x, Tensor& out) {
  Reciprocal(out.backend().main_lane(), x, out);
}
inline void Div(const Tensor& a, const Tensor& b, Tensor& out) {
  Div(out.backend().main_lane(), a, b, out);
}
inline void AddScalar(const Tensor& x, float s, Tensor& out) {
  AddScalar(out.backend().main_lane(), x, s, out);
}
inline void MulScalar(const Tensor& x, float s, Tensor& out) {
  MulScalar(out.backend().main_lane(), x, s, out);
}
inline void BroadcastAdd(const Tensor& x, const Tensor& v, Broadcast how, Tensor& out) {
  BroadcastAdd(out.backend().main_lane(), x, v, how, out);
}
inline void BroadcastSub(const Tensor& x, const Tensor& v, Broadcast how, Tensor& out) {
  BroadcastSub(out.backend().main_lane(), x, v, how, out);
}
inline void BroadcastMul(const Tensor& x, const Tensor& v, Broadcast how, Tensor& out) {
  BroadcastMul(out.backend().main_lane(), x, v, how, out);
}
inline void BroadcastDiv(const Tensor& x, const Tensor& v, Broadcast how, Tensor& out) {
  BroadcastDiv(out.backend().main_lane(), x, v, how, out);
}
inline void RowSum(const Tensor& x, Tensor& out) { RowSum(out.backend().main_lane(), x, out); }
inline void RowMean(const Tensor& x, Tensor& out) { RowMean(out.backend().main_lane(), x, out); }
inline void RowMax(const Tensor& x, Tensor& out) { RowMax(out.backend().main_lane(), x, out); }
inline void RowVariance(const Tensor& x, Tensor& out) {
  RowVariance(out.backend().main_lane(), x, out);
}
inline void Softmax(const Tensor& x, Tensor& out) { Softmax(out.backend().main_lane(), x, out); }
inline void Transpose(const Tensor& x, Tensor& out) {
  Transpose(out.backend().main_lane(), x, out);
}
inline void GatherRows(const Tensor& table, const Tensor& indices, Tensor& out) {
  GatherRows(out.backend().main_lane(), table, indices, out);
}
inline void ScatterAddRows(const Tensor& src, const Tensor& indices, Tensor& table) {
  ScatterAddRows(table.backend().main_lane(), src, indices, table);
}

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OPS_MATH_H_
