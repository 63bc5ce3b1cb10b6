#include "layers/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"

namespace tandem {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

std::vector<int64_t> Probes(int64_t n, int64_t max_probes) {
  std::vector<int64_t> idx;
  const int64_t stride = std::max<int64_t>(1, n / max_probes);
  for (int64_t i = 0; i < n && static_cast<int64_t>(idx.size()) < max_probes; i += stride) {
    idx.push_back(i);
  }
  return idx;
}

// "[2, 5]": the position of flat index `i` in `shape` (row-major).
std::string ElementToString(const Shape& shape, int64_t i) {
  Shape at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = shape[d] > 0 ? i % shape[d] : 0;
    i = shape[d] > 0 ? i / shape[d] : 0;
  }
  return ShapeToString(at);
}

// Perturbs element i of `t` by +-step and returns (f(+) - f(-)) / (2 step).
double CentralDifference(Tensor& t, int64_t i, float step,
                         const std::function<double()>& f) {
  std::vector<float> host = t.ToVector();
  const float original = host[i];
  host[i] = original + step;
  t.CopyFrom(Tensor::FromVector(host, t.shape()));
  const double plus = f();
  host[i] = original - step;
  t.CopyFrom(Tensor::FromVector(host, t.shape()));
  const double minus = f();
  host[i] = original;
  t.CopyFrom(Tensor::FromVector(host, t.shape()));
  return (plus - minus) / (2.0 * step);
}

TensorGradCheck Compare(std::string what, Tensor& t, const std::vector<float>& analytic,
                        const GradCheckOptions& options, const std::function<double()>& f) {
  TensorGradCheck check;
  check.what = std::move(what);
  check.shape = t.shape();
  double diff = 0, num_norm = 0, ana_norm = 0, worst_gap = -1;
  for (int64_t i : Probes(t.numel(), options.max_probes)) {
    const double num = CentralDifference(t, i, options.step, f);
    const double gap = std::abs(num - analytic[i]);
    const double rank = std::isnan(gap) ? kInf : gap;  // a NaN is the worst there is
    if (rank > worst_gap) {
      worst_gap = rank;
      check.worst = i;
      check.numeric = num;
      check.analytic = analytic[i];
    }
    diff += gap * gap;
    num_norm += num * num;
    ana_norm += double(analytic[i]) * analytic[i];
    ++check.probes;
  }
  const double denom = std::max({std::sqrt(num_norm), std::sqrt(ana_norm), 1e-12});
  check.error = std::isnan(diff) ? std::numeric_limits<double>::quiet_NaN()
                                  : std::sqrt(diff) / denom;
  std::cout << "  gradient check " << check << "\n";
  return check;
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const TensorGradCheck& check) {
  out << check.what << " " << ShapeToString(check.shape) << ": relative error " << check.error;
  if (check.probes > 0) {
    out << ", worst at element " << ElementToString(check.shape, check.worst) << ": Backward "
        << check.analytic << ", central difference " << check.numeric;
  }
  return out;
}

double GradCheckResult::max_error() const { return tensors.empty() ? 0 : worst().error; }

const TensorGradCheck& GradCheckResult::worst() const {
  TANDEM_CHECK(!tensors.empty()) << "gradient check: no tensor was compared";
  const TensorGradCheck* worst = &tensors[0];
  for (const TensorGradCheck& t : tensors) {
    if (std::isnan(worst->error)) break;
    if (std::isnan(t.error) || t.error > worst->error) worst = &t;
  }
  return *worst;
}

const GradCheckResult& GradCheckResult::Require(double tolerance) const {
  if (tensors.empty()) return *this;
  const TensorGradCheck& w = worst();
  TANDEM_CHECK(w.error <= tolerance)
      << "gradient check: " << w.what << " " << ShapeToString(w.shape)
      << " has relative error " << w.error << ", over the tolerance " << tolerance
      << "; worst at element " << ElementToString(w.shape, w.worst) << ": Backward gave "
      << w.analytic << ", central differences of Forward " << w.numeric << " (" << w.probes
      << " elements probed): check that Backward adds this gradient and reads what Forward"
         " saved; a kink at the probed point (ReLU at 0) or a Forward that changes from call"
         " to call (dropout: GradCheckOptions::before_forward) also make them differ";
  return *this;
}

GradCheckResult CompareLayerGradients(Layer& layer, const Tensor& x_in,
                                      const GradCheckOptions& options) {
  Tensor x = x_in.Clone();
  auto forward = [&]() {
    if (options.before_forward) options.before_forward();
    return layer.Forward(x);
  };
  Tensor y = forward();
  Rng rng(99);
  std::vector<float> r(y.numel());
  for (float& v : r) v = rng.Normal();
  Tensor r_t = Tensor::FromVector(r, y.shape(), y.device());
  auto objective = [&]() { return Dot(forward().ToVector(), r); };

  ZeroGrad(layer);
  forward();
  const std::vector<float> dx = layer.Backward(r_t).ToVector();
  GradCheckResult result;
  result.tensors.push_back(
      Compare("input of layer '" + layer.Name() + "'", x, dx, options, objective));
  for (NamedParameter& p : layer.Parameters()) {
    const std::vector<float> analytic = p.grad().ToVector();
    result.tensors.push_back(
        Compare("parameter '" + p.name + "'", p.value(), analytic, options, objective));
  }
  return result;
}

GradCheckResult CompareLossGradient(Loss& loss, const Tensor& pred_in, const Tensor& target,
                                    const GradCheckOptions& options) {
  Tensor pred = pred_in.Clone();
  auto objective = [&]() { return double(loss.Forward(pred, target).Item()); };
  objective();
  const std::vector<float> analytic = loss.Backward().ToVector();
  GradCheckResult result;
  result.tensors.push_back(
      Compare("prediction of loss '" + loss.Name() + "'", pred, analytic, options, objective));
  return result;
}

double CheckLayerGradients(Layer& layer, const Tensor& x, const GradCheckOptions& options) {
  return CompareLayerGradients(layer, x, options).max_error();
}

double CheckLossGradient(Loss& loss, const Tensor& pred, const Tensor& target,
                         const GradCheckOptions& options) {
  return CompareLossGradient(loss, pred, target, options).max_error();
}

}  // namespace tandem
