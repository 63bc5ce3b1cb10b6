#include "trainer/grad_clip.h"

#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

GradClipper::GradClipper(std::vector<NamedParameter> params, float max_norm, Device device)
    : params_(std::move(params)), max_norm_(max_norm) {
  TANDEM_CHECK(max_norm > 0) << "GradClipper: max_norm must be positive, got " << max_norm;
  squares_ = Tensor::Zeros({1, static_cast<int64_t>(params_.size())}, device);
  norm_ = Tensor::Zeros({1}, device);
  pair_ = Tensor::Zeros({1, 2}, device);
  factor_ = Tensor::Zeros({1}, device);
}

void GradClipper::Clip() {
  const int64_t n = static_cast<int64_t>(params_.size());
  Tensor squares = squares_.Reshape({n});
  for (int64_t i = 0; i < n; ++i) {
    Tensor slot = squares.Slice(i, i + 1);
    const Tensor& grad = params_[i].grad();
    if (grad.defined()) {
      ops::SumOfSquares(grad, slot);
    } else {
      ops::Fill(slot, 0.f);
    }
  }
  ops::RowSum(squares_, norm_);
  ops::Sqrt(norm_, norm_);
  // factor = max_norm / max(norm + eps, max_norm): 1 while norm <= max_norm.
  Tensor first = pair_.Reshape({2}).Slice(0, 1), second = pair_.Reshape({2}).Slice(1, 2);
  ops::AddScalar(norm_, 1e-6f, first);
  ops::Fill(second, max_norm_);
  ops::RowMax(pair_, factor_);
  ops::Reciprocal(factor_, factor_);
  ops::MulScalar(factor_, max_norm_, factor_);
  for (const NamedParameter& p : params_) {
    Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    Tensor row = grad.Reshape({1, grad.numel()});
    ops::BroadcastMul(row, factor_, Broadcast::kColumn, row);
  }
}

}  // namespace tandem
