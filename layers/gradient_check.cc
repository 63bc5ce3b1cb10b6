#include "layers/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/ops.h"
#include "core/rng.h"

namespace tandem {
namespace {

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

double Compare(const std::string& what, Tensor& t, const std::vector<float>& analytic,
               const GradCheckOptions& options, const std::function<double()>& f) {
  double diff = 0, num_norm = 0, ana_norm = 0;
  for (int64_t i : Probes(t.numel(), options.max_probes)) {
    const double num = CentralDifference(t, i, options.step, f);
    diff += (num - analytic[i]) * (num - analytic[i]);
    num_norm += num * num;
    ana_norm += double(analytic[i]) * analytic[i];
  }
  const double denom = std::max({std::sqrt(num_norm), std::sqrt(ana_norm), 1e-12});
  const double err = std::sqrt(diff) / denom;
  std::cout << "  gradient check " << what << ": relative error " << err << "\n";
  return err;
}

}  // namespace

double CheckLayerGradients(Layer& layer, const Tensor& x_in,
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
  double worst = Compare(layer.Name() + " input", x, dx, options, objective);
  for (Parameter& p : layer.Parameters()) {
    const std::vector<float> analytic = p.grad->ToVector();
    worst = std::max(worst, Compare(p.name, *p.value, analytic, options, objective));
  }
  return worst;
}

double CheckLossGradient(Loss& loss, const Tensor& pred_in, const Tensor& target,
                         const GradCheckOptions& options) {
  Tensor pred = pred_in.Clone();
  auto objective = [&]() { return double(loss.Forward(pred, target).Item()); };
  objective();
  const std::vector<float> analytic = loss.Backward().ToVector();
  return Compare(loss.Name(), pred, analytic, options, objective);
}

}  // namespace tandem
