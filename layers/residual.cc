#include "layers/residual.h"

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Residual::Residual(std::string name, std::unique_ptr<Layer> inner)
    : name_(std::move(name)), inner_(std::move(inner)) {
  TANDEM_CHECK(inner_ != nullptr) << "layer '" << name_ << "' (Residual): null inner layer";
  inner_->SetTraining(training());
}

std::string Residual::Describe() const {
  return name_ + " (Residual: " + inner_->Describe() + ")";
}

Tensor Residual::ForwardWith(const Tensor& x, const ForwardArgs& args) {
  Tensor fx = ForwardChild(*inner_, x, args);
  TANDEM_CHECK(fx.shape() == x.shape())
      << "layer '" << name_ << "' (Residual) got input " << ShapeToString(x.shape())
      << " but its inner layer " << inner_->Describe() << " returned "
      << ShapeToString(fx.shape()) << ": x + inner(x) needs the same shape";
  // In fx's dtype: a bf16 inner layer given float32 data computes in bf16.
  const Tensor xs = ops::ToDType(x, fx.dtype());
  // A new tensor, not fx: see the header.
  Tensor y = Tensor::Empty(x.shape(), x.device(), fx.dtype());
  ops::Add(xs, fx, y);
  input_shape_ = x.shape();
  forward_pending_ = true;
  return y;
}

Tensor Residual::Backward(const Tensor& dy) {
  const BackwardArgs args = BackwardArgs::For(dy.device());
  Tensor dx = BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

Tensor Residual::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  TANDEM_CHECK(forward_pending_)
      << "layer '" << name_ << "' (Residual): Backward without a Forward before it (each "
         "Forward allows one Backward)";
  TANDEM_CHECK(dy.shape() == input_shape_)
      << "layer '" << name_ << "' (Residual) got output gradient "
      << ShapeToString(dy.shape()) << ": expected " << ShapeToString(input_shape_);
  forward_pending_ = false;
  const Tensor dfx = BackwardChild(*inner_, dy, args);
  if (args.on_params_ready) args.on_params_ready();
  if (!args.input_grad) return Tensor();
  TANDEM_CHECK(dfx.defined() && dfx.shape() == dy.shape())
      << "layer '" << name_ << "' (Residual): its inner layer " << inner_->Describe()
      << " returned an input gradient "
      << (dfx.defined() ? ShapeToString(dfx.shape()) : std::string("(undefined)"))
      << " for an output gradient " << ShapeToString(dy.shape());
  Tensor dx = Tensor::Empty(dy.shape(), dy.device(), dy.dtype());
  ops::Add(args.lane, dy, ops::ToDType(args.lane, dfx, dy.dtype()), dx);
  return dx;
}

}  // namespace tandem
