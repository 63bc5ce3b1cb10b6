#include "layers/linear.h"

#include <cmath>
#include <optional>
#include <utility>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Init ParseInit(const std::string& name) {
  if (name == "kaiming_uniform") return Init::kKaimingUniform;
  if (name == "kaiming_normal") return Init::kKaimingNormal;
  if (name == "xavier_uniform") return Init::kXavierUniform;
  if (name == "xavier_normal") return Init::kXavierNormal;
  TANDEM_CHECK(false) << "unknown init '" << name
                      << "': expected kaiming_uniform, kaiming_normal, "
                         "xavier_uniform or xavier_normal";
  return Init::kKaimingUniform;
}

namespace {
std::vector<float> InitialWeights(Init init, int64_t in, int64_t out, Rng& rng) {
  std::vector<float> w(static_cast<size_t>(in * out));
  const double fan_sum = static_cast<double>(in + out);
  switch (init) {
    case Init::kKaimingUniform: {
      const float bound = static_cast<float>(std::sqrt(6.0 / in));
      for (float& x : w) x = rng.Uniform(-bound, bound);
      break;
    }
    case Init::kKaimingNormal: {
      const float std = static_cast<float>(std::sqrt(2.0 / in));
      for (float& x : w) x = rng.Normal(0.f, std);
      break;
    }
    case Init::kXavierUniform: {
      const float bound = static_cast<float>(std::sqrt(6.0 / fan_sum));
      for (float& x : w) x = rng.Uniform(-bound, bound);
      break;
    }
    case Init::kXavierNormal: {
      const float std = static_cast<float>(std::sqrt(2.0 / fan_sum));
      for (float& x : w) x = rng.Normal(0.f, std);
      break;
    }
  }
  return w;
}
}  // namespace

Linear::Linear(std::string name, int64_t in_features, int64_t out_features,
               Rng& rng, LinearOptions options)
    : name_(std::move(name)), in_(in_features), out_(out_features),
      options_(options) {
  TANDEM_CHECK(in_ > 0 && out_ > 0)
      << "layer '" << name_ << "': Linear sizes must be positive, got " << in_
      << "→" << out_;
  weight_ = Tensor::FromVector(InitialWeights(options.init, in_, out_, rng),
                               {out_, in_}, options.device);
  weight_grad_ = Tensor::Zeros({out_, in_}, options.device);
  if (options.bias) {
    bias_ = Tensor::Zeros({out_}, options.device);
    bias_grad_ = Tensor::Zeros({out_}, options.device);
  }
}

std::string Linear::Describe() const {
  std::ostringstream out;
  out << name_ << " (Linear " << in_ << "→" << out_;
  if (options_.activation != Activation::kIdentity) {
    out << ", " << ActivationName(options_.activation);
  }
  out << ")";
  return out.str();
}

std::vector<Parameter> Linear::Parameters() {
  std::vector<Parameter> params = {{name_ + ".weight", &weight_, &weight_grad_}};
  if (options_.bias) params.push_back({name_ + ".bias", &bias_, &bias_grad_});
  return params;
}

Tensor Linear::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() == 2 && x.dim(1) == in_)
      << "layer '" << name_ << "' (Linear " << in_ << "→" << out_
      << ") got input " << ShapeToString(x.shape()) << ": expected [batch, "
      << in_ << "]";
  TANDEM_CHECK(x.device() == weight_.device())
      << "layer '" << name_ << "' has parameters on " << weight_.device()
      << " but got input on " << x.device();
  // A previous Backward may have left an update of W on the side lane.
  ops::JoinSideLane(x.device());
  input_ = x;
  Tensor y = Tensor::Empty({x.dim(0), out_}, x.device());
  if (options_.activation == Activation::kIdentity ||
      options_.activation == Activation::kRelu) {
    // One GEMM with the bias and ReLU in its epilogue (cuBLASLt on a GPU).
    // ReLU's gradient needs only the sign of x W^T + b, which the output
    // keeps (relu(z) > 0 exactly when z > 0), so nothing else is stored.
    ops::GemmOptions o;
    o.bias = options_.bias ? &bias_ : nullptr;
    o.activation = options_.activation;
    ops::Gemm(x, false, weight_, true, y, o);  // [batch, in] x [out, in]^T
    if (options_.activation == Activation::kRelu) pre_activation_ = y;
    return y;
  }
  ops::Gemm(x, false, weight_, true, y);
  // GELU and tanh: keep x W^T + b for the activation's gradient; y gets
  // act() of it.
  pre_activation_ = y;
  Tensor out = Tensor::Empty(y.shape(), y.device());
  if (options_.bias) {
    ops::BiasActivation(options_.activation, y, bias_, &pre_activation_, out);
  } else {
    ops::ActivationForward(options_.activation, y, out);
  }
  return out;
}

bool Linear::SetGradTarget(GradTarget target) {
  TANDEM_CHECK(target.kind != GradTarget::kApplySgd || target.lr >= 0.f)
      << "layer '" << name_ << "': SGD in backward needs a learning rate >= 0, got "
      << target.lr;
  set_grad_target(target);
  return true;
}

Tensor Linear::Backward(const Tensor& dy) {
  TANDEM_CHECK(input_.defined()) << "layer '" << name_
                                 << "': Backward called before Forward";
  TANDEM_CHECK(dy.rank() == 2 && dy.dim(0) == input_.dim(0) && dy.dim(1) == out_)
      << "layer '" << name_ << "' (Linear " << in_ << "→" << out_
      << ") got output gradient " << ShapeToString(dy.shape())
      << ": expected [" << input_.dim(0) << ", " << out_ << "]";
  // A member, not a local: the side lane may still read it after Backward
  // returns, and its memory must not be handed to the next layer meanwhile.
  grad_output_ = dy;
  if (options_.activation != Activation::kIdentity) {
    grad_output_ = Tensor::Empty(dy.shape(), dy.device());
    ops::ActivationBackward(options_.activation, pre_activation_, dy,
                            grad_output_);
  }
  const Tensor& dz = grad_output_;
  const Device device = dy.device();
  const bool apply_sgd = grad_target().kind == GradTarget::kApplySgd;
  if (apply_sgd) {
    // SGD in backward: W_next = W - lr dz^T x, written by the weight-gradient
    // GEMM itself (no gradient is stored, read back or updated separately).
    // It must not overwrite W, which the input-gradient GEMM below reads at
    // the same time, so the new weights go to a second buffer and the two
    // swap after this step; the bias, which backward does not read, is
    // updated in place.
    if (!weight_next_.defined() || weight_next_.device() != device) {
      weight_next_ = Tensor::Empty(weight_.shape(), device);
    }
    ops::SideLane side(device);
    ops::GemmOptions o;
    o.alpha = -grad_target().lr;
    o.beta = 1.f;
    o.c = &weight_;
    ops::Gemm(dz, true, input_, false, weight_next_, o);
    if (options_.bias) ops::ColumnSums(dz, bias_, 1.f, -grad_target().lr);
  } else {
    // The weight gradient runs on the side lane beside the input gradient,
    // which the next layer waits for; Sequential::Backward (and any reader
    // of the gradients) joins the lanes. With gradients_first() it runs
    // before the input gradient, on the main lane: beside it, the two GEMMs
    // share the SMs and end together, so an all-reduce of the gradient
    // could start only when the input gradient is done too (Note
    // [Gradients first] in parallel/reducer.cc).
    const float beta = grad_target().kind == GradTarget::kAccumulate ? 1.f : 0.f;
    {
      std::optional<ops::SideLane> side;
      if (!gradients_first()) side.emplace(device);
      ops::Gemm(dz, true, input_, false, weight_grad_, 1.f, beta);  // dz^T x
      if (options_.bias) ops::ColumnSums(dz, bias_grad_, beta);
    }
    // The gradients are queued: data parallelism may start reducing them
    // now, beside the input-gradient GEMM below, which reads only dz and W.
    NotifyGradientsQueued();
  }
  Tensor dx;
  if (needs_input_grad()) {
    dx = Tensor::Empty(input_.shape(), device);
    ops::Gemm(dz, false, weight_, false, dx);  // [batch, out] x [out, in]
  }
  if (apply_sgd) {
    // SGD was applied above; the new weights are in weight_next_ (see
    // there), so the two buffers trade places.
    std::swap(weight_, weight_next_);
  }
  return dx;
}

}  // namespace tandem
