// The ops of attention: products of batches of matrices, the causal
// softmax of a batch of [T, T] score matrices and its gradient, the
// transpose of the last two dimensions, any reordering of dimensions,
// joining and splitting along a dimension, and masked fill. Part of the public op set:
// `#include "core/ops.h"` brings them in. Like every op, each checks its
// operands and runs on a lane of their device (or the main lane of its
// output's device when the call names none), with no host wait and no
// scratch memory on a GPU.
//
//   // q, k, v [B, H, T, hs]; scores and probs [B, H, T, T]; y [B, H, T, hs]
//   ops::BatchedMatMul(q, false, k, true, scores);         // q k^T
//   ops::CausalSoftmax(scores, 1.f / std::sqrt(hs), probs);
//   ops::BatchedMatMul(probs, false, v, false, y);         // probs v
//   // backward, from dy [B, H, T, hs]:
//   ops::BatchedMatMul(dy, false, v, true, dprobs);         // dy v^T
//   ops::BatchedMatMul(probs, true, dy, false, dv);         // probs^T dy
//   ops::CausalSoftmaxBackward(probs, dprobs, 1.f / std::sqrt(hs), dscores);
//
// Batches: every dimension before the last two is a batch dimension, so a
// [B, H, T, hs] tensor is B * H matrices [T, hs] with no copy (Reshape views
// fold or split them freely). An operand of BatchedMatMul given as a single
// matrix (2-D) is used for every product of the batch: a broadcast, with no
// copy.
//
// Dtypes: float32 or bfloat16, arithmetic and sums in float32, each result
// rounded once. On a GPU the products are one cuBLAS strided-batched call,
// and each softmax is one fused kernel (scale, mask, row maximum,
// exponentials and normalisation); on the CPU the products go to the
// backend's GEMM library (Note [Batched GEMMs on the CPU] in
// core/cpu/cpu_batched_gemm.h).
#ifndef TANDEM_CORE_OPS_ATTENTION_H_
#define TANDEM_CORE_OPS_ATTENTION_H_

#include <vector>

#include "core/backend.h"
#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace ops {

struct BatchedMatMulOptions {
  float alpha = 1.f;
  float beta = 0.f;  // c is read only when beta is not 0
  // float32 operands: TF32 tensor cores on GPUs that have them.
  bool tf32 = false;
};

// c [..., m, n] = alpha op(a) op(b) + beta c for every matrix of the batch:
// op(a) [..., m, k] is a, or a with its last two dimensions swapped
// (trans_a), and op(b) [..., k, n] likewise. a and b each have c's batch
// dimensions, or are 2-D (one matrix for every product). a and b share a
// dtype; float32 a and b give a float32 c, bfloat16 ones a c of either
// dtype. c must not overlap a or b.
void BatchedMatMul(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   Tensor& c, const BatchedMatMulOptions& options);
void BatchedMatMul(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   Tensor& c, float alpha = 1.f, float beta = 0.f);

// x and out [..., T, T] (T > 0): for each matrix, row i is softmax(scale *
// x[i, 0..i]) over columns 0..i, and out[i, j] is exactly 0 for j > i (what
// x holds there is never read). In float32; x and out of one dtype; out may
// be x.
void CausalSoftmax(const Lane& lane, const Tensor& x, float scale, Tensor& out);
// The gradient with respect to x of CausalSoftmax's out = y, given dy:
// dx[i, j] = scale y[i, j] (dy[i, j] - sum over j' <= i of dy[i, j'] y[i, j'])
// for j <= i, exactly 0 for j > i. y, dy and dx [..., T, T] of one dtype;
// dx may be dy or y.
void CausalSoftmaxBackward(const Lane& lane, const Tensor& y, const Tensor& dy, float scale,
                           Tensor& dx);

// out [..., cols, rows] = x [..., rows, cols] with each matrix transposed:
// a copy, bit for bit; one dtype; out must not overlap x.
void TransposeLastTwo(const Lane& lane, const Tensor& x, Tensor& out);

// out = x with its dimensions reordered: out's dimension i is x's dimension
// dims[i], as numpy's transpose(x, dims) (PyTorch's permute). A copy, bit
// for bit, in one pass; one dtype; out must not overlap x. Dimensions that
// stay next to each other move together, so after merging them (and
// dropping dimensions of size 1) at most 6 may remain: splitting attention
// heads, [batch, T, 3, heads, hs] -> [3, heads, batch, T, hs], is 3.
//   ops::Permute(qkv.Reshape({B, T, 3, H, hs}), {2, 3, 0, 1, 4}, heads);
void Permute(const Lane& lane, const Tensor& x, const std::vector<int>& dims, Tensor& out);

// out = the xs joined along dimension `dim` (numpy's concatenate): every x
// has out's shape but in `dim`, and out's size there is theirs summed. A
// copy, one strided copy per x; one dtype; out apart from every x.
//   ops::Concat({q, k, v}, /*dim=*/1, qkv);   // [B, T, C] x 3 -> [B, 3 T, C]
void Concat(const Lane& lane, const std::vector<Tensor>& xs, int dim, Tensor& out);
// The inverse: each of outs gets its part of x along `dim`, in order; their
// sizes there sum to x's. Along dimension 0 a Slice is the same without the
// copy.
void Split(const Lane& lane, const Tensor& x, int dim, std::vector<Tensor>& outs);

// out = x where mask is 0, `fill` (rounded to out's dtype) where it is not,
// as PyTorch's masked_fill: mask is float32 of x's shape, or of its last
// dimensions, then the same for every index of the ones before (a [T, T]
// mask for every [..., T, T] score matrix). x and out of one shape and
// dtype; out may be x, not mask.
//   ops::MaskedFill(scores, padding, -INFINITY, scores);   // before a softmax
void MaskedFill(const Lane& lane, const Tensor& x, const Tensor& mask, float fill, Tensor& out);

// The same on the main lane of their output's device.
inline void BatchedMatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                          const BatchedMatMulOptions& options) {
  BatchedMatMul(c.backend().main_lane(), a, trans_a, b, trans_b, c, options);
}
inline void BatchedMatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                          float alpha = 1.f, float beta = 0.f) {
  BatchedMatMul(c.backend().main_lane(), a, trans_a, b, trans_b, c, alpha, beta);
}
inline void CausalSoftmax(const Tensor& x, float scale, Tensor& out) {
  CausalSoftmax(out.backend().main_lane(), x, scale, out);
}
inline void CausalSoftmaxBackward(const Tensor& y, const Tensor& dy, float scale, Tensor& dx) {
  CausalSoftmaxBackward(dx.backend().main_lane(), y, dy, scale, dx);
}
inline void TransposeLastTwo(const Tensor& x, Tensor& out) {
  TransposeLastTwo(out.backend().main_lane(), x, out);
}
inline void Permute(const Tensor& x, const std::vector<int>& dims, Tensor& out) {
  Permute(out.backend().main_lane(), x, dims, out);
}
inline void Concat(const std::vector<Tensor>& xs, int dim, Tensor& out) {
  Concat(out.backend().main_lane(), xs, dim, out);
}
inline void Split(const Tensor& x, int dim, std::vector<Tensor>& outs) {
  Split(x.backend().main_lane(), x, dim, outs);
}
inline void MaskedFill(const Tensor& x, const Tensor& mask, float fill, Tensor& out) {
  MaskedFill(out.backend().main_lane(), x, mask, fill, out);
}

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OPS_ATTENTION_H_
