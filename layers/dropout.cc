#include "layers/dropout.h"

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Dropout::Dropout(std::string name, float p, uint64_t seed)
    : name_(std::move(name)), p_(p), seed_(seed) {
  TANDEM_CHECK(p >= 0.f && p < 1.f)
      << "layer '" << name_ << "': dropout probability must be in [0, 1), got "
      << p;
}

std::string Dropout::Describe() const {
  return name_ + " (Dropout p=" + std::to_string(p_) + ")";
}

Tensor Dropout::Forward(const Tensor& x) {
  if (!training() || p_ == 0.f) {
    mask_.Reset();
    return x;
  }
  Tensor mask = Tensor::Empty(x.shape(), x.device(), x.dtype());
  ops::DropoutMask(p_, seed_, offset_, mask);
  offset_ += static_cast<uint64_t>(x.numel());
  Tensor y = Tensor::Empty(x.shape(), x.device(), x.dtype());
  ops::Mul(x, mask, y);
  mask_.Save(mask);
  return y;
}

Tensor Dropout::Backward(const Tensor& dy) {
  if (!mask_.defined()) return dy;
  const Tensor& mask = mask_.Get(*this);
  TANDEM_CHECK(dy.shape() == mask.shape())
      << "layer '" << Describe() << "' got output gradient "
      << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(mask.shape());
  Tensor dx = Tensor::Empty(dy.shape(), dy.device(), dy.dtype());
  ops::Mul(dy, mask, dx);
  return dx;
}

}  // namespace tandem
