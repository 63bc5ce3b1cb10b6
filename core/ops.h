// The public op set on Tensors. Each op checks shapes and devices, then runs
// on a lane (core/lane.h) of the tensors' device through its Backend
// (core/backend.h). Outputs are passed in, so callers control allocation;
// ops never resize.
//
// Every op takes the lane it runs on as its first argument; the same op
// without a lane runs on the main lane of its operands' device:
//
//   Tensor y = Tensor::Empty({batch, out}, x.device());
//   ops::Gemm(x, false, w, true, y);               // y = x w^T, main lane
//   ops::Gemm(lane, dy, true, x, false, dw);       // dw = dy^T x, on `lane`
//   ops::WaitFor(main, lane);                      // main's later ops see dw
//
// Errors name the op and the shapes, e.g.
//   "Gemm: op(a) is [64, 200] but op(b) is [256, 128]: inner dimensions differ"
//
// Dtypes: float32 and bfloat16 (core/dtype.h). Each op says which operands
// must share a dtype; errors name the op, the operands and their dtypes.
// Arithmetic runs in float32 and rounds each result once; losses, softmax
// and reductions keep float32 (their scalar outputs are float32).
//
// Aliasing: an output may be the same tensor as an input of the same shape
// in the element-wise ops (Add, Sub, Mul, Axpy, Scale, ActivationForward,
// ActivationBackward, BiasActivation's x and out, the updates' param); GEMM
// outputs must not overlap a or b (GemmOptions::c may be d). The math ops
// (core/ops_math.h, included here) say so per op: the element-wise ones,
// Div, the scalar ops, the broadcasts (out may be x, not v) and Softmax may
// write in place; the row reductions, Transpose, GatherRows and
// ScatterAddRows (table must not overlap src or the indices) may not, and
// they check it. So may not the layer-norm ops (core/ops_layer_norm.h,
// included here): their outputs overlap no input. The attention ops
// (core/ops_attention.h, included here) say so per op.
#ifndef TANDEM_CORE_OPS_H_
#define TANDEM_CORE_OPS_H_

#include <cstdint>

#include "core/backend.h"
#include "core/lane.h"
#include "core/ops_math.h"  // the math ops for custom layers, part of this op set
#include "core/ops_attention.h"  // batched products and causal softmax, part of this op set
#include "core/ops_layer_norm.h"  // fused layer normalisation, part of this op set
#include "core/tensor.h"

namespace tandem {
namespace ops {

// `waiter`'s later work runs after everything queued on `producer` so far;
// the host does not wait, unless the waiter is the CPU and the producer a
// GPU (then the host blocks until the producer is there). Nothing when both
// are the same queue or the producer is the CPU. The lanes may belong to
// different devices.
void WaitFor(const Lane& waiter, const Lane& producer);

// c = alpha * op(a) op(b) + beta * c for 2-D a, b, c. a and b share a
// dtype; float32 a and b give a float32 c, bfloat16 ones a c of either
// dtype.
void Gemm(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b,
          bool trans_b, Tensor& c, float alpha = 1.f, float beta = 0.f);
// The general form: d = act(alpha op(a) op(b) + beta c + bias), for a
// result in its own buffer (c defaults to d) and a fused bias and
// activation (dispatch::Gemm).
struct GemmOptions {
  float alpha = 1.f;
  float beta = 0.f;
  const Tensor* c = nullptr;     // what beta scales, [m, n]; null: d
  const Tensor* bias = nullptr;  // [n], added to every row; null: none
  Activation activation = Activation::kIdentity;
  // float32 operands: TF32 tensor cores on GPUs that have them.
  bool tf32 = false;
};
void Gemm(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b,
          bool trans_b, Tensor& d, const GemmOptions& options);
// out = act(x + bias) with x [rows, cols] and bias [cols]; pre (optional)
// receives x + bias. x may be the same tensor as out or pre.
void BiasActivation(const Lane& lane, Activation activation, const Tensor& x,
                    const Tensor& bias, Tensor* pre, Tensor& out);
// x += bias, row by row.
void AddBias(const Lane& lane, Tensor& x, const Tensor& bias);
// out = beta * out + alpha * column sums of x [rows, cols]; out is [cols].
void ColumnSums(const Lane& lane, const Tensor& x, Tensor& out,
                float beta = 0.f, float alpha = 1.f);
void Add(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out);
void Sub(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out);
void Mul(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out);
// y += alpha * x
void Axpy(const Lane& lane, float alpha, const Tensor& x, Tensor& y);
void Scale(const Lane& lane, Tensor& x, float alpha);
void Fill(const Lane& lane, Tensor& x, float value);
// dst = src in dst's dtype (same numel; float32 <-> bfloat16 rounds to
// nearest even).
void Cast(const Lane& lane, const Tensor& src, Tensor& dst);
// `t` itself when it has `dtype`, else a new tensor holding it cast.
Tensor ToDType(const Lane& lane, const Tensor& t, DType dtype);
void ActivationForward(const Lane& lane, Activation activation,
                       const Tensor& x, Tensor& y);
// dx = dy * act'(x), or += when accumulate. dy and dx share a dtype, except
// on a backend that widens bfloat16, where dx may be float32 beside a
// bfloat16 dy, or the other way round.
void ActivationBackward(const Lane& lane, Activation activation,
                        const Tensor& x, const Tensor& dy, Tensor& dx,
                        bool accumulate = false);
// dz = dy * act'(x) for x [rows, cols], and sums [cols] = beta * sums +
// the column sums of dz: ActivationBackward then ColumnSums, in one pass
// where the backend can (a layer's pre-activation and bias gradients). dz
// may be dy. dy and dz share a dtype as in ActivationBackward.
void ActivationBackwardColumnSums(const Lane& lane, Activation activation, const Tensor& x,
                                  const Tensor& dy, Tensor& dz, Tensor& sums,
                                  float beta = 0.f);
// loss [1] = mean-style cross-entropy of softmax(logits [rows, classes])
// against labels [rows] (class indices as floats), divided by normalizer
// (<= 0 means rows). dlogits, if given, gets the gradient of loss. Main
// lane only (it uses scratch memory).
void SoftmaxCrossEntropy(const Lane& lane, const Tensor& logits,
                         const Tensor& labels, Tensor& loss, Tensor* dlogits,
                         float normalizer = 0.f);
// loss [1] = sum (pred - target)^2 / normalizer (<= 0 means numel). Main
// lane only.
void Mse(const Lane& lane, const Tensor& pred, const Tensor& target,
         Tensor& loss, Tensor* dpred, float normalizer = 0.f);
// out [1] = the sum of the squares of x's elements (float32 or bfloat16 x,
// any shape; float32 out), summed in double in an order fixed by x's size:
// the square of x's L2 norm. Main lane only (it uses scratch memory).
void SumOfSquares(const Lane& lane, const Tensor& x, Tensor& out);
// out [rows] = argmax of each row of x [rows, cols].
void Argmax(const Lane& lane, const Tensor& x, Tensor& out);
// out [1] = number of rows of logits whose argmax equals labels. Main lane
// only.
void CountCorrect(const Lane& lane, const Tensor& logits, const Tensor& labels,
                  Tensor& out);
void DropoutMask(const Lane& lane, float p, uint64_t seed, uint64_t offset,
                 Tensor& mask);
// first_bad [1] (start it at -1) records the first step whose loss [1] was
// NaN or infinite. Steps must be < 2^24 to be exact in a float.
void TrackNonFinite(const Lane& lane, const Tensor& loss, int64_t step,
                    Tensor& first_bad);
// Updates of a float32 parameter from a float32 or bfloat16 gradient, with
// float32 state; `working` (optional) receives the updated values in its
// own dtype, in the same pass (a mixed-precision layer's bfloat16 copy).
void SgdUpdate(const Lane& lane, const SgdParams& params, Tensor& param,
               const Tensor& grad, Tensor* velocity, Tensor* working = nullptr);
void AdamWUpdate(const Lane& lane, const AdamWParams& params, int64_t step,
                 Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                 Tensor* working = nullptr);

// The same ops on the main lane of their output's device.
inline Lane MainLaneOf(const Tensor& t) { return t.backend().main_lane(); }

inline void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                 Tensor& c, float alpha = 1.f, float beta = 0.f) {
  Gemm(MainLaneOf(c), a, trans_a, b, trans_b, c, alpha, beta);
}
inline void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                 Tensor& d, const GemmOptions& options) {
  Gemm(MainLaneOf(d), a, trans_a, b, trans_b, d, options);
}
inline void BiasActivation(Activation activation, const Tensor& x,
                           const Tensor& bias, Tensor* pre, Tensor& out) {
  BiasActivation(MainLaneOf(out), activation, x, bias, pre, out);
}
inline void AddBias(Tensor& x, const Tensor& bias) {
  AddBias(MainLaneOf(x), x, bias);
}
inline void ColumnSums(const Tensor& x, Tensor& out, float beta = 0.f,
                       float alpha = 1.f) {
  ColumnSums(MainLaneOf(out), x, out, beta, alpha);
}
inline void Add(const Tensor& a, const Tensor& b, Tensor& out) {
  Add(MainLaneOf(out), a, b, out);
}
inline void Sub(const Tensor& a, const Tensor& b, Tensor& out) {
  Sub(MainLaneOf(out), a, b, out);
}
inline void Mul(const Tensor& a, const Tensor& b, Tensor& out) {
  Mul(MainLaneOf(out), a, b, out);
}
inline void Axpy(float alpha, const Tensor& x, Tensor& y) {
  Axpy(MainLaneOf(y), alpha, x, y);
}
inline void Scale(Tensor& x, float alpha) { Scale(MainLaneOf(x), x, alpha); }
inline void Fill(Tensor& x, float value) { Fill(MainLaneOf(x), x, value); }
inline void Cast(const Tensor& src, Tensor& dst) { Cast(MainLaneOf(dst), src, dst); }
inline Tensor ToDType(const Tensor& t, DType dtype) { return ToDType(MainLaneOf(t), t, dtype); }
inline void ActivationForward(Activation activation, const Tensor& x,
                              Tensor& y) {
  ActivationForward(MainLaneOf(y), activation, x, y);
}
inline void ActivationBackward(Activation activation, const Tensor& x,
                               const Tensor& dy, Tensor& dx,
                               bool accumulate = false) {
  ActivationBackward(MainLaneOf(dx), activation, x, dy, dx, accumulate);
}
inline void ActivationBackwardColumnSums(Activation activation, const Tensor& x,
                                         const Tensor& dy, Tensor& dz, Tensor& sums,
                                         float beta = 0.f) {
  ActivationBackwardColumnSums(MainLaneOf(dz), activation, x, dy, dz, sums, beta);
}
inline void SoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels,
                                Tensor& loss, Tensor* dlogits,
                                float normalizer = 0.f) {
  SoftmaxCrossEntropy(MainLaneOf(loss), logits, labels, loss, dlogits,
                      normalizer);
}
inline void Mse(const Tensor& pred, const Tensor& target, Tensor& loss,
                Tensor* dpred, float normalizer = 0.f) {
  Mse(MainLaneOf(loss), pred, target, loss, dpred, normalizer);
}
inline void SumOfSquares(const Tensor& x, Tensor& out) {
  SumOfSquares(MainLaneOf(out), x, out);
}
inline void Argmax(const Tensor& x, Tensor& out) {
  Argmax(MainLaneOf(out), x, out);
}
inline void CountCorrect(const Tensor& logits, const Tensor& labels,
                         Tensor& out) {
  CountCorrect(MainLaneOf(out), logits, labels, out);
}
inline void DropoutMask(float p, uint64_t seed, uint64_t offset, Tensor& mask) {
  DropoutMask(MainLaneOf(mask), p, seed, offset, mask);
}
inline void TrackNonFinite(const Tensor& loss, int64_t step,
                           Tensor& first_bad) {
  TrackNonFinite(MainLaneOf(first_bad), loss, step, first_bad);
}
inline void SgdUpdate(const SgdParams& params, Tensor& param,
                      const Tensor& grad, Tensor* velocity,
                      Tensor* working = nullptr) {
  SgdUpdate(MainLaneOf(param), params, param, grad, velocity, working);
}
inline void AdamWUpdate(const AdamWParams& params, int64_t step, Tensor& param,
                        const Tensor& grad, Tensor& m, Tensor& v,
                        Tensor* working = nullptr) {
  AdamWUpdate(MainLaneOf(param), params, step, param, grad, m, v, working);
}

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OPS_H_
