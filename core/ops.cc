#include "core/ops.h"

#include <cmath>
#include <initializer_list>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/dispatch.h"
#include "core/op_checks.h"

namespace tandem {
namespace ops {
namespace {

using internal::CheckMatrix;
using internal::CheckOperands;
using internal::CheckSameDType;

void CheckFloat32(const char* op, const char* name, const Tensor& t) {
  TANDEM_CHECK(t.dtype() == DType::kFloat32)
      << op << ": " << name << " is " << DTypeName(t.dtype()) << " "
      << ShapeToString(t.shape()) << ", expected float32";
}

void CheckSameNumel(const char* op, const Tensor& a, const Tensor& b) {
  TANDEM_CHECK(a.numel() == b.numel())
      << op << ": shapes " << ShapeToString(a.shape()) << " and "
      << ShapeToString(b.shape()) << " differ in size";
}


void CheckRowsAndBias(const char* op, const Tensor& x, const Tensor& bias) {
  CheckMatrix(op, "x", x);
  TANDEM_CHECK(bias.numel() == x.dim(1))
      << op << ": bias " << ShapeToString(bias.shape()) << " does not match "
      << x.dim(1) << " columns of x " << ShapeToString(x.shape());
}

void CheckLabels(const char* op, const Tensor& logits, const Tensor& labels) {
  CheckMatrix(op, "logits", logits);
  CheckFloat32(op, "labels", labels);
  TANDEM_CHECK(labels.numel() == logits.dim(0))
      << op << ": " << labels.numel() << " labels for " << logits.dim(0)
      << " rows of logits " << ShapeToString(logits.shape());
}

void CheckScalar(const char* op, const Tensor& t) {
  TANDEM_CHECK(t.numel() == 1) << op << ": output must have one element, got "
                               << ShapeToString(t.shape());
  CheckFloat32(op, "the output", t);
}

Ptr OptionalPtr(const Tensor* t) { return t != nullptr ? t->ptr() : Ptr{}; }
// For an output: counts the write (Note [Tensor versions] in core/tensor.cc).
Ptr OptionalMutablePtr(const Tensor* t) { return t != nullptr ? t->mutable_ptr() : Ptr{}; }

struct GemmSizes {
  int64_t m, n, k;
};
// Checks a Gemm's operands and its output (`out_name` in errors), and
// returns op(a)'s [m, k] and op(b)'s n.
GemmSizes CheckGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                    const Tensor& out, const char* out_name) {
  CheckMatrix("Gemm", "a", a);
  CheckMatrix("Gemm", "b", b);
  CheckMatrix("Gemm", out_name, out);
  CheckSameDType("Gemm", "a", a, "b", b);
  TANDEM_CHECK(a.dtype() == DType::kBFloat16 || out.dtype() == DType::kFloat32)
      << "Gemm: float32 a and b give a float32 result, but " << out_name << " is "
      << DTypeName(out.dtype());
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  TANDEM_CHECK(k == kb) << "Gemm: op(a) is [" << m << ", " << k << "] but op(b) is [" << kb
                        << ", " << n << "]: inner dimensions differ";
  TANDEM_CHECK(out.dim(0) == m && out.dim(1) == n)
      << "Gemm: " << out_name << " is " << ShapeToString(out.shape()) << ", expected [" << m
      << ", " << n << "]";
  return {m, n, k};
}

}  // namespace

void Gemm(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          Tensor& d, const GemmOptions& o) {
  const Tensor* c = o.c != nullptr ? o.c : &d;
  CheckOperands("Gemm", lane, {&a, &b, c, &d, o.bias});
  const GemmSizes s = CheckGemm(a, trans_a, b, trans_b, d, "d");
  TANDEM_CHECK(c->shape() == d.shape())
      << "Gemm: c is " << ShapeToString(c->shape()) << " but d is "
      << ShapeToString(d.shape());
  CheckSameDType("Gemm", "c", *c, "d", d);
  if (o.bias != nullptr) {
    TANDEM_CHECK(o.bias->numel() == s.n)
        << "Gemm: bias " << ShapeToString(o.bias->shape()) << " for " << s.n << " columns";
    CheckSameDType("Gemm", "bias", *o.bias, "d", d);
  }
  if (s.m == 0 || s.n == 0) return;
  GemmSpec spec;
  spec.bias = OptionalPtr(o.bias);
  spec.activation = o.activation;
  spec.tf32 = o.tf32;
  dispatch::Gemm(lane, trans_a, trans_b, s.m, s.n, s.k, o.alpha, a.ptr(), b.ptr(),
                 o.beta, c->ptr(), d.mutable_ptr(), spec);
}

void Gemm(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          Tensor& c, float alpha, float beta) {
  GemmOptions o;
  o.alpha = alpha;
  o.beta = beta;
  Gemm(lane, a, trans_a, b, trans_b, c, o);
}

void BiasActivation(const Lane& lane, Activation activation, const Tensor& x,
                    const Tensor& bias, Tensor* pre, Tensor& out) {
  const char* op = "BiasActivation";
  CheckOperands(op, lane, {&x, &bias, pre, &out});
  CheckRowsAndBias(op, x, bias);
  CheckSameNumel(op, x, out);
  CheckSameDType(op, "x", x, "out", out);
  CheckSameDType(op, "x", x, "bias", bias);
  if (pre != nullptr) {
    CheckSameNumel(op, x, *pre);
    CheckSameDType(op, "x", x, "pre", *pre);
  }
  if (x.numel() == 0) return;
  dispatch::BiasActivation(lane, activation, x.ptr(), bias.ptr(), OptionalMutablePtr(pre),
                           out.mutable_ptr(), x.dim(0), x.dim(1));
}

void AddBias(const Lane& lane, Tensor& x, const Tensor& bias) {
  BiasActivation(lane, Activation::kIdentity, x, bias, nullptr, x);
}

void ColumnSums(const Lane& lane, const Tensor& x, Tensor& out, float beta, float alpha) {
  CheckOperands("ColumnSums", lane, {&x, &out});
  CheckMatrix("ColumnSums", "x", x);
  TANDEM_CHECK(out.numel() == x.dim(1))
      << "ColumnSums: out " << ShapeToString(out.shape()) << " for x "
      << ShapeToString(x.shape());
  if (out.numel() == 0) return;
  dispatch::ColumnSums(lane, x.ptr(), x.dim(0), x.dim(1), alpha, beta, out.mutable_ptr());
}

namespace {
void BinaryOpChecked(const Lane& lane, const char* name, BinaryOp op, const Tensor& a,
                     const Tensor& b, Tensor& out) {
  CheckOperands(name, lane, {&a, &b, &out});
  CheckSameNumel(name, a, b);
  CheckSameNumel(name, a, out);
  CheckSameDType(name, "a", a, "b", b);
  CheckSameDType(name, "a", a, "out", out);
  if (a.numel() == 0) return;
  dispatch::Binary(lane, op, a.ptr(), b.ptr(), out.mutable_ptr(), a.numel());
}
}  // namespace

void Add(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out) {
  BinaryOpChecked(lane, "Add", BinaryOp::kAdd, a, b, out);
}
void Sub(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out) {
  BinaryOpChecked(lane, "Sub", BinaryOp::kSub, a, b, out);
}
void Mul(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out) {
  BinaryOpChecked(lane, "Mul", BinaryOp::kMul, a, b, out);
}

void Axpy(const Lane& lane, float alpha, const Tensor& x, Tensor& y) {
  CheckOperands("Axpy", lane, {&x, &y});
  CheckSameNumel("Axpy", x, y);
  if (x.numel() == 0) return;
  dispatch::Axpy(lane, alpha, x.ptr(), y.mutable_ptr(), x.numel());
}

void Scale(const Lane& lane, Tensor& x, float alpha) {
  CheckOperands("Scale", lane, {&x});
  if (x.numel() == 0) return;
  dispatch::Scale(lane, alpha, x.mutable_ptr(), x.numel());
}

void Fill(const Lane& lane, Tensor& x, float value) {
  CheckOperands("Fill", lane, {&x});
  if (x.numel() == 0) return;
  dispatch::Fill(lane, value, x.mutable_ptr(), x.numel());
}

void Cast(const Lane& lane, const Tensor& src, Tensor& dst) {
  CheckOperands("Cast", lane, {&src, &dst});
  CheckSameNumel("Cast", src, dst);
  if (src.numel() == 0) return;
  dispatch::Cast(lane, src.ptr(), dst.mutable_ptr(), src.numel());
}

Tensor ToDType(const Lane& lane, const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor cast = Tensor::Empty(t.shape(), t.device(), dtype);
  Cast(lane, t, cast);
  return cast;
}

void ActivationForward(const Lane& lane, Activation activation, const Tensor& x, Tensor& y) {
  CheckOperands("ActivationForward", lane, {&x, &y});
  CheckSameNumel("ActivationForward", x, y);
  CheckSameDType("ActivationForward", "x", x, "y", y);
  if (x.numel() == 0) return;
  dispatch::ActivationForward(lane, activation, x.ptr(), y.mutable_ptr(), x.numel());
}

void ActivationBackward(const Lane& lane, Activation activation, const Tensor& x,
                        const Tensor& dy, Tensor& dx, bool accumulate) {
  const char* op = "ActivationBackward";
  CheckOperands(op, lane, {&x, &dy, &dx});
  CheckSameNumel(op, x, dy);
  CheckSameNumel(op, x, dx);
  CheckSameDType(op, "dy", dy, "dx", dx);
  if (x.numel() == 0) return;
  dispatch::ActivationBackward(lane, activation, x.ptr(), dy.ptr(), dx.mutable_ptr(),
                               x.numel(), accumulate);
}

void ActivationBackwardColumnSums(const Lane& lane, Activation activation, const Tensor& x,
                                  const Tensor& dy, Tensor& dz, Tensor& sums, float beta) {
  const char* op = "ActivationBackwardColumnSums";
  CheckOperands(op, lane, {&x, &dy, &dz, &sums});
  CheckMatrix(op, "x", x);
  CheckSameNumel(op, x, dy);
  CheckSameNumel(op, x, dz);
  CheckSameDType(op, "dy", dy, "dz", dz);
  TANDEM_CHECK(sums.numel() == x.dim(1))
      << op << ": sums " << ShapeToString(sums.shape()) << " for x " << ShapeToString(x.shape())
      << ": sums needs one element per column of x, [" << x.dim(1) << "]";
  if (x.numel() == 0) {  // no rows: sums = beta * sums, as ColumnSums
    if (beta == 0.f) Fill(lane, sums, 0.f);
    else if (beta != 1.f) Scale(lane, sums, beta);
    return;
  }
  dispatch::ActivationBackwardColumnSums(lane, activation, x.ptr(), dy.ptr(),
                                         dz.mutable_ptr(), x.dim(0), x.dim(1), beta,
                                         sums.mutable_ptr());
}

void SoftmaxCrossEntropy(const Lane& lane, const Tensor& logits, const Tensor& labels,
                         Tensor& loss, Tensor* dlogits, float normalizer) {
  const char* op = "SoftmaxCrossEntropy";
  CheckOperands(op, lane, {&logits, &labels, &loss, dlogits});
  CheckLabels(op, logits, labels);
  CheckScalar(op, loss);
  if (dlogits) {
    CheckSameNumel(op, logits, *dlogits);
    CheckSameDType(op, "logits", logits, "dlogits", *dlogits);
  }
  TANDEM_CHECK(logits.dim(1) > 0) << "SoftmaxCrossEntropy: no classes in logits "
                                  << ShapeToString(logits.shape());
  if (normalizer <= 0.f) normalizer = static_cast<float>(logits.dim(0));
  if (logits.dim(0) == 0) {
    Fill(lane, loss, 0.f);
    return;
  }
  dispatch::SoftmaxCrossEntropy(lane, logits.ptr(), labels.data(), logits.dim(0),
                                logits.dim(1), normalizer, loss.mutable_data(),
                                OptionalMutablePtr(dlogits));
}

void Mse(const Lane& lane, const Tensor& pred, const Tensor& target, Tensor& loss,
         Tensor* dpred, float normalizer) {
  CheckOperands("Mse", lane, {&pred, &target, &loss, dpred});
  TANDEM_CHECK(pred.shape() == target.shape())
      << "Mse: prediction " << ShapeToString(pred.shape()) << " and target "
      << ShapeToString(target.shape()) << " differ";
  CheckScalar("Mse", loss);
  if (dpred) {
    CheckSameNumel("Mse", pred, *dpred);
    CheckSameDType("Mse", "pred", pred, "dpred", *dpred);
  }
  if (normalizer <= 0.f) normalizer = static_cast<float>(pred.numel());
  if (pred.numel() == 0) {
    Fill(lane, loss, 0.f);
    return;
  }
  dispatch::Mse(lane, pred.ptr(), target.ptr(), pred.numel(), normalizer, loss.mutable_data(),
                OptionalMutablePtr(dpred));
}

// The backends' squared-error reduction with no target (zeros): their
// deterministic sum in double.
void SumOfSquares(const Lane& lane, const Tensor& x, Tensor& out) {
  CheckOperands("SumOfSquares", lane, {&x, &out});
  CheckScalar("SumOfSquares", out);
  TANDEM_CHECK(lane.device().is_cpu() || SameQueue(lane, lane.backend().main_lane()))
      << "SumOfSquares on " << lane.device() << " uses scratch memory and runs on the main "
      << "lane only, not the " << lane.Describe();
  if (x.numel() == 0) {
    Fill(lane, out, 0.f);
    return;
  }
  dispatch::Mse(lane, x.ptr(), CPtr{}, x.numel(), /*normalizer=*/1.f, out.mutable_data(), Ptr{});
}

void Argmax(const Lane& lane, const Tensor& x, Tensor& out) {
  CheckOperands("Argmax", lane, {&x, &out});
  CheckMatrix("Argmax", "x", x);
  CheckFloat32("Argmax", "out", out);
  TANDEM_CHECK(out.numel() == x.dim(0))
      << "Argmax: out " << ShapeToString(out.shape()) << " for x " << ShapeToString(x.shape());
  TANDEM_CHECK(x.dim(1) > 0) << "Argmax of rows with no columns";
  if (x.dim(0) == 0) return;
  dispatch::Argmax(lane, x.ptr(), x.dim(0), x.dim(1), out.mutable_data());
}

void CountCorrect(const Lane& lane, const Tensor& logits, const Tensor& labels, Tensor& out) {
  CheckOperands("CountCorrect", lane, {&logits, &labels, &out});
  CheckLabels("CountCorrect", logits, labels);
  CheckScalar("CountCorrect", out);
  if (logits.dim(0) == 0) {
    Fill(lane, out, 0.f);
    return;
  }
  dispatch::CountCorrect(lane, logits.ptr(), labels.data(), logits.dim(0),
                         logits.dim(1), out.mutable_data());
}

void DropoutMask(const Lane& lane, float p, uint64_t seed, uint64_t offset, Tensor& mask) {
  CheckOperands("DropoutMask", lane, {&mask});
  TANDEM_CHECK(p >= 0.f && p < 1.f) << "DropoutMask: p must be in [0, 1), got " << p;
  if (mask.numel() == 0) return;
  dispatch::DropoutMask(lane, p, seed, offset, mask.mutable_ptr(), mask.numel());
}

void TrackNonFinite(const Lane& lane, const Tensor& loss, int64_t step, Tensor& first_bad) {
  CheckOperands("TrackNonFinite", lane, {&loss, &first_bad});
  CheckScalar("TrackNonFinite", loss);
  CheckScalar("TrackNonFinite", first_bad);
  TANDEM_CHECK(step >= 0 && step < (int64_t{1} << 24))
      << "TrackNonFinite: step " << step << " is not exact as a float";
  dispatch::TrackNonFinite(lane, loss.data(), step, first_bad.mutable_data());
}

namespace {
// The optimizer state of an update: float32, the parameter's size.
void CheckUpdate(const char* op, const Tensor& param, const Tensor& grad,
                 std::initializer_list<const Tensor*> state, const Tensor* working) {
  CheckFloat32(op, "the parameter", param);
  CheckSameNumel(op, param, grad);
  for (const Tensor* s : state) {
    if (s == nullptr) continue;
    CheckFloat32(op, "the optimizer state", *s);
    CheckSameNumel(op, param, *s);
  }
  if (working != nullptr) CheckSameNumel(op, param, *working);
}
}  // namespace

void SgdUpdate(const Lane& lane, const SgdParams& params, Tensor& param, const Tensor& grad,
               Tensor* velocity, Tensor* working) {
  CheckOperands("SgdUpdate", lane, {&param, &grad, velocity, working});
  TANDEM_CHECK(params.momentum == 0.f || velocity != nullptr)
      << "SgdUpdate: momentum " << params.momentum << " needs a velocity buffer";
  CheckUpdate("SgdUpdate", param, grad, {velocity}, working);
  if (param.numel() == 0) return;
  dispatch::SgdUpdate(lane, params, param.mutable_data(), grad.ptr(),
                      velocity ? velocity->mutable_data() : nullptr,
                      OptionalMutablePtr(working), param.numel());
}

void AdamWUpdate(const Lane& lane, const AdamWParams& params, int64_t step, Tensor& param,
                 const Tensor& grad, Tensor& m, Tensor& v, Tensor* working) {
  CheckOperands("AdamWUpdate", lane, {&param, &grad, &m, &v, working});
  CheckUpdate("AdamWUpdate", param, grad, {&m, &v}, working);
  TANDEM_CHECK(step >= 1) << "AdamWUpdate: step counts from 1, got " << step;
  if (param.numel() == 0) return;
  dispatch::AdamWUpdate(lane, params, step, param.mutable_data(), grad.ptr(),
                        m.mutable_data(), v.mutable_data(),
                        OptionalMutablePtr(working), param.numel());
}

void WaitFor(const Lane& waiter, const Lane& producer) {
  TANDEM_CHECK(waiter.valid() && producer.valid())
      << "WaitFor(" << waiter.Describe() << ", " << producer.Describe()
      << "): both lanes must be given";
  if (SameQueue(waiter, producer)) return;
  const Device from = producer.device();
  if (from.is_cpu()) return;  // CPU work is done when its call returns
  if (waiter.device().is_cpu()) {
    producer.backend().Synchronize(producer);
    return;
  }
  producer.backend().WaitFor(waiter, producer);
}

}  // namespace ops
}  // namespace tandem
