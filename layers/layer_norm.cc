#include "layers/layer_norm.h"

#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

LayerNorm::LayerNorm(std::string name, int64_t features, Device device,
                     LayerNormOptions options)
    : name_(std::move(name)), features_(features), options_(options) {
  TANDEM_CHECK(features_ > 0) << "layer '" << name_
                              << "': LayerNorm needs a positive feature count, got "
                              << features_;
  TANDEM_CHECK(options_.eps >= 0.f)
      << "layer '" << name_ << "': LayerNorm eps must be >= 0, got " << options_.eps;
  policy_.precision = options.precision;
  weight_ = Parameter(Tensor::Full({features_}, 1.f, device));
  bias_ = Parameter(Tensor::Zeros({features_}, device));
  if (policy_.bf16()) {
    // Placeholders, kept where Parameters() hands them out (Note [bf16 where
    // the device does not multiply bfloat16] in layers/precision.h).
    weight_.KeepWorkingCopy(DType::kBFloat16);
    bias_.KeepWorkingCopy(DType::kBFloat16);
    SyncWorkingCopies(*this);
  }
}

std::string LayerNorm::Describe() const {
  std::ostringstream out;
  out << name_ << " (LayerNorm " << features_;
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

std::vector<NamedParameter> LayerNorm::Parameters() {
  const bool working = has_working_copies();
  return {{name_ + ".weight", &weight_, working}, {name_ + ".bias", &bias_, working}};
}

Tensor LayerNorm::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() >= 2 && x.dim(-1) == features_)
      << "layer '" << name_ << "' (LayerNorm " << features_ << ") got input "
      << ShapeToString(x.shape()) << ": expected [rows, " << features_ << "] or [..., "
      << features_ << "]";
  TANDEM_CHECK(x.device() == weight_.value().device())
      << "layer '" << name_ << "' has parameters on " << weight_.value().device()
      << " but got input on " << x.device();
  // [..., features] is [rows, features] as a view: the fused op sees rows.
  const int64_t rows = x.numel() / features_;
  const Tensor input = ops::ToDType(x, compute_dtype()).Reshape({rows, features_});
  Tensor y = Tensor::Empty({rows, features_}, x.device(), compute_dtype());
  mean_ = Tensor::Empty({rows}, x.device());
  rstd_ = Tensor::Empty({rows}, x.device());
  ops::LayerNormForward(input, weight_for_math(), bias_for_math(), options_.eps, y, mean_,
                        rstd_);
  input_.Save(input);
  input_shape_ = x.shape();
  return y.Reshape(x.shape());
}

Tensor LayerNorm::Backward(const Tensor& dy) {
  return BackwardWith(dy, BackwardArgs::For(dy.device()));
}

// All of it on args.lane, in one fused pass where the input gradient is
// wanted: the parameter gradients come with it, and on_params_ready follows
// at once. An update writes the weights after that pass, which read them.
Tensor LayerNorm::BackwardWith(const Tensor& dy_in, const BackwardArgs& args) {
  const Tensor& x = input_.Get(*this);  // [rows, features]
  TANDEM_CHECK(dy_in.shape() == input_shape_)
      << "layer '" << name_ << "' (LayerNorm " << features_ << ") got output gradient "
      << ShapeToString(dy_in.shape()) << ": expected " << ShapeToString(input_shape_);
  const Tensor dy = dy_in.Reshape(x.shape());
  TANDEM_CHECK(dy.device() == x.device())
      << "layer '" << name_ << "' ran Forward on " << x.device()
      << " but got an output gradient on " << dy.device();
  const Lane& lane = args.lane;
  // Gradients start from zero unless they accumulate; one left undefined
  // (an update folded into an earlier backward) is made again, as Linear does.
  const bool fresh = args.update != nullptr || args.grad_mode == GradMode::kOverwrite;
  for (Tensor* grad : {&weight_.grad(), &bias_.grad()}) {
    if (!grad->defined()) {
      *grad = Tensor::Zeros(weight_.value().shape(), weight_.value().device());
    } else if (fresh) {
      ops::Fill(lane, *grad, 0.f);
    }
  }
  const Tensor g = ops::ToDType(lane, dy, compute_dtype());
  Tensor dx;
  if (args.input_grad) dx = Tensor::Empty(x.shape(), x.device(), compute_dtype());
  ops::LayerNormBackward(lane, x, g, weight_for_math(), mean_, rstd_,
                         args.input_grad ? &dx : nullptr, &weight_.grad(), &bias_.grad());
  if (args.update != nullptr) {
    args.update->FromGradient(lane, weight_, weight_.grad());
    args.update->FromGradient(lane, bias_, bias_.grad());
  }
  if (args.on_params_ready) args.on_params_ready();
  // One Backward per Forward: what Forward kept goes back to the allocator.
  input_.Reset();
  mean_ = Tensor();
  rstd_ = Tensor();
  return dx.defined() ? dx.Reshape(input_shape_) : dx;
}

}  // namespace tandem
