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
  weight_ = Tensor::Full({features_}, 1.f, device);
  weight_grad_ = Tensor::Zeros({features_}, device);
  bias_ = Tensor::Zeros({features_}, device);
  bias_grad_ = Tensor::Zeros({features_}, device);
  if (policy_.bf16()) {
    // Placeholders, kept where Parameters() hands them out (Note [bf16 where
    // the device does not multiply bfloat16] in layers/precision.h).
    weight_work_ = Tensor::Empty({0}, device, DType::kBFloat16);
    bias_work_ = Tensor::Empty({0}, device, DType::kBFloat16);
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

std::vector<Parameter> LayerNorm::Parameters() {
  const bool working = has_working_copies();
  return {{name_ + ".weight", &weight_, &weight_grad_, working ? &weight_work_ : nullptr},
          {name_ + ".bias", &bias_, &bias_grad_, working ? &bias_work_ : nullptr}};
}

Tensor LayerNorm::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() == 2 && x.dim(1) == features_)
      << "layer '" << name_ << "' (LayerNorm " << features_ << ") got input "
      << ShapeToString(x.shape()) << ": expected [rows, " << features_ << "]";
  TANDEM_CHECK(x.device() == weight_.device())
      << "layer '" << name_ << "' has parameters on " << weight_.device()
      << " but got input on " << x.device();
  const Tensor input = ops::ToDType(x, compute_dtype());
  const int64_t rows = x.dim(0);
  Tensor y = Tensor::Empty(x.shape(), x.device(), compute_dtype());
  mean_ = Tensor::Empty({rows}, x.device());
  rstd_ = Tensor::Empty({rows}, x.device());
  ops::LayerNormForward(input, weight_for_math(), bias_for_math(), options_.eps, y, mean_,
                        rstd_);
  input_.Save(input);
  return y;
}

Tensor LayerNorm::Backward(const Tensor& dy) {
  const Tensor& x = input_.Get(*this);
  TANDEM_CHECK(dy.shape() == x.shape())
      << "layer '" << name_ << "' (LayerNorm " << features_ << ") got output gradient "
      << ShapeToString(dy.shape()) << ": expected " << ShapeToString(x.shape());
  TANDEM_CHECK(dy.device() == x.device())
      << "layer '" << name_ << "' ran Forward on " << x.device()
      << " but got an output gradient on " << dy.device();
  // A gradient left undefined (an update folded into an earlier backward)
  // is made again, zeroed, as Linear does.
  if (!weight_grad_.defined()) weight_grad_ = Tensor::Zeros(weight_.shape(), weight_.device());
  if (!bias_grad_.defined()) bias_grad_ = Tensor::Zeros(bias_.shape(), bias_.device());
  const Tensor g = ops::ToDType(dy, compute_dtype());
  Tensor dx = Tensor::Empty(x.shape(), x.device(), compute_dtype());
  ops::LayerNormBackward(x, g, weight_for_math(), mean_, rstd_, &dx, &weight_grad_,
                         &bias_grad_);
  // One Backward per Forward: what Forward kept goes back to the allocator.
  input_.Reset();
  mean_ = Tensor();
  rstd_ = Tensor();
  return dx;
}

}  // namespace tandem
