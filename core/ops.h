// The public op set on Tensors. Each op checks shapes and devices, then runs
// on the tensors' device through its Backend (core/backend.h). Outputs are
// passed in, so callers control allocation; ops never resize.
//
//   Tensor y = Tensor::Empty({batch, out}, x.device());
//   ops::Gemm(x, false, w, true, y);               // y = x w^T
//   ops::BiasActivation(Activation::kRelu, y, b, nullptr, y);
//
// Errors name the op and the shapes, e.g.
//   "Gemm: op(a) is [64, 200] but op(b) is [256, 128]: inner dimensions differ"
#ifndef TANDEM_CORE_OPS_H_
#define TANDEM_CORE_OPS_H_

#include <cstdint>

#include "core/backend.h"
#include "core/tensor.h"

namespace tandem {
namespace ops {

// c = alpha * op(a) op(b) + beta * c for 2-D a, b, c.
void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          Tensor& c, float alpha = 1.f, float beta = 0.f);
// The general form: d = act(alpha op(a) op(b) + beta c + bias), for a
// result in its own buffer (c defaults to d) and a fused bias and
// activation (Backend::GemmEx).
struct GemmOptions {
  float alpha = 1.f;
  float beta = 0.f;
  const Tensor* c = nullptr;     // what beta scales, [m, n]; null: d
  const Tensor* bias = nullptr;  // [n], added to every row; null: none
  Activation activation = Activation::kIdentity;
};
void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          Tensor& d, const GemmOptions& options);
// out = act(x + bias) with x [rows, cols] and bias [cols]; pre (optional)
// receives x + bias. x may be the same tensor as out or pre.
void BiasActivation(Activation activation, const Tensor& x, const Tensor& bias,
                    Tensor* pre, Tensor& out);
// x += bias, row by row.
void AddBias(Tensor& x, const Tensor& bias);
// out = beta * out + alpha * column sums of x [rows, cols]; out is [cols].
void ColumnSums(const Tensor& x, Tensor& out, float beta = 0.f,
                float alpha = 1.f);
void Add(const Tensor& a, const Tensor& b, Tensor& out);
void Sub(const Tensor& a, const Tensor& b, Tensor& out);
void Mul(const Tensor& a, const Tensor& b, Tensor& out);
// y += alpha * x
void Axpy(float alpha, const Tensor& x, Tensor& y);
void Scale(Tensor& x, float alpha);
void Fill(Tensor& x, float value);
void ActivationForward(Activation activation, const Tensor& x, Tensor& y);
// dx = dy * act'(x), or += when accumulate.
void ActivationBackward(Activation activation, const Tensor& x,
                        const Tensor& dy, Tensor& dx, bool accumulate = false);
// loss [1] = mean-style cross-entropy of softmax(logits [rows, classes])
// against labels [rows] (class indices as floats), divided by normalizer
// (<= 0 means rows). dlogits, if given, gets the gradient of loss.
void SoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels,
                         Tensor& loss, Tensor* dlogits,
                         float normalizer = 0.f);
// loss [1] = sum (pred - target)^2 / normalizer (<= 0 means numel).
void Mse(const Tensor& pred, const Tensor& target, Tensor& loss, Tensor* dpred,
         float normalizer = 0.f);
// out [rows] = argmax of each row of x [rows, cols].
void Argmax(const Tensor& x, Tensor& out);
// out [1] = number of rows of logits whose argmax equals labels.
void CountCorrect(const Tensor& logits, const Tensor& labels, Tensor& out);
void DropoutMask(float p, uint64_t seed, uint64_t offset, Tensor& mask);
// first_bad [1] (start it at -1) records the first step whose loss [1] was
// NaN or infinite. Steps must be < 2^24 to be exact in a float.
void TrackNonFinite(const Tensor& loss, int64_t step, Tensor& first_bad);
// The side lane of `device`'s backend (Backend::BeginSideLane): ops the
// calling thread queues while a SideLane is alive go there.
//
//   { ops::SideLane side(x.device());
//     ops::Gemm(dz, true, x, false, dw, 1.f, 0.f); }  // beside what follows
//   ...
//   ops::JoinSideLane(x.device());                     // before reading dw
class SideLane {
 public:
  explicit SideLane(Device device);
  ~SideLane();
  SideLane(const SideLane&) = delete;
  SideLane& operator=(const SideLane&) = delete;

 private:
  Backend& backend_;
};
// The main lane of `device` waits for the side lane's work so far.
void JoinSideLane(Device device);

void SgdUpdate(const SgdParams& params, Tensor& param, const Tensor& grad,
               Tensor* velocity);
void AdamWUpdate(const AdamWParams& params, int64_t step, Tensor& param,
                 const Tensor& grad, Tensor& m, Tensor& v);

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OPS_H_
