// A layer norm written only with the public ops (core/ops.h): it runs on CPU
// and GPU without knowing which, and never makes the host wait (every op is
// queued on the device). Tandem's own LayerNorm (layers/layer_norm.h) fuses
// the same arithmetic into one kernel each way; this one shows how far the
// op set takes a custom layer. It computes in float32 and casts a bf16
// model's activations at its edges. docs/custom_layers.md walks through it.
//
//   y = (x - mean) * rsqrt(var + eps) * gamma + beta, row by row
#ifndef TANDEM_EXAMPLES_CUSTOM_LAYER_ROW_NORM_H_
#define TANDEM_EXAMPLES_CUSTOM_LAYER_ROW_NORM_H_

#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace example {

using tandem::Broadcast;
using tandem::Tensor;
namespace ops = tandem::ops;

class RowNorm : public tandem::Layer {
 public:
  RowNorm(std::string name, int64_t features, tandem::Device device, float eps = 1e-5f)
      : name_(std::move(name)), features_(features), eps_(eps) {
    gamma_ = tandem::Parameter(Tensor::Full({features}, 1.f, device));  // gradients: zeros
    beta_ = tandem::Parameter(Tensor::Zeros({features}, device));
  }

  Tensor Forward(const Tensor& x_in) override {  // x [rows, features]
    TANDEM_CHECK(x_in.rank() == 2 && x_in.dim(1) == features_)
        << "layer '" << name_ << "' got input " << tandem::ShapeToString(x_in.shape())
        << ": expected [rows, " << features_ << "]";
    const Tensor x = ops::ToDType(x_in, tandem::DType::kFloat32);  // bf16 models too
    const int64_t rows = x.dim(0);
    Tensor mean = Tensor::Empty({rows}, x.device());
    Tensor rstd = Tensor::Empty({rows}, x.device());
    Tensor xhat = Tensor::Empty(x.shape(), x.device());
    ops::RowMean(x, mean);
    ops::RowVariance(x, rstd);
    ops::AddScalar(rstd, eps_, rstd);
    ops::Rsqrt(rstd, rstd);                                  // 1 / sqrt(var + eps)
    ops::BroadcastSub(x, mean, Broadcast::kColumn, xhat);    // x - mean
    ops::BroadcastMul(xhat, rstd, Broadcast::kColumn, xhat);
    Tensor y = Tensor::Empty(x.shape(), x.device());
    ops::BroadcastMul(xhat, gamma_.value(), Broadcast::kRow, y);
    ops::BroadcastAdd(y, beta_.value(), Broadcast::kRow, y);
    xhat_.Save(xhat);
    rstd_.Save(rstd);
    return y;
  }

  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
  Tensor Backward(const Tensor& dy_in) override {
    const Tensor dy = ops::ToDType(dy_in, tandem::DType::kFloat32);
    const Tensor& xhat = xhat_.Get(*this);
    const Tensor& rstd = rstd_.Get(*this);
    const int64_t rows = dy.dim(0);
    ops::ColumnSums(dy, beta_.grad(), /*beta=*/1.f);              // dbeta += sum dy
    Tensor g = Tensor::Empty(dy.shape(), dy.device());
    ops::Mul(dy, xhat, g);
    ops::ColumnSums(g, gamma_.grad(), /*beta=*/1.f);              // dgamma += sum dy * xhat
    ops::BroadcastMul(dy, gamma_.value(), Broadcast::kRow, g);      // g = dy * gamma
    Tensor mean_g = Tensor::Empty({rows}, dy.device());
    Tensor mean_gx = Tensor::Empty({rows}, dy.device());
    Tensor dx = Tensor::Empty(dy.shape(), dy.device());
    ops::RowMean(g, mean_g);
    ops::Mul(g, xhat, dx);
    ops::RowMean(dx, mean_gx);
    ops::BroadcastMul(xhat, mean_gx, Broadcast::kColumn, dx);
    ops::Sub(g, dx, dx);
    ops::BroadcastSub(dx, mean_g, Broadcast::kColumn, dx);
    ops::BroadcastMul(dx, rstd, Broadcast::kColumn, dx);
    return dx;
  }

  std::vector<tandem::NamedParameter> Parameters() override {
    return {{name_ + ".weight", &gamma_}, {name_ + ".bias", &beta_}};
  }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  int64_t features_;
  float eps_;
  tandem::Parameter gamma_, beta_;  // each owns its value and gradient
  tandem::SavedTensor xhat_{"normalised input"}, rstd_{"1/std"};
};

}  // namespace example

#endif  // TANDEM_EXAMPLES_CUSTOM_LAYER_ROW_NORM_H_
