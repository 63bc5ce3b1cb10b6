#include "layers/loss.h"

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Tensor SoftmaxCrossEntropyLoss::Forward(const Tensor& logits,
                                        const Tensor& labels,
                                        int64_t examples) {
  TANDEM_CHECK(logits.rank() == 2)
      << "softmax_cross_entropy: logits must be [batch, classes], got "
      << ShapeToString(logits.shape());
  Tensor loss = Tensor::Empty({1}, logits.device());
  Tensor grad = Tensor::Empty(logits.shape(), logits.device(), logits.dtype());
  ops::SoftmaxCrossEntropy(logits, labels, loss, &grad,
                           static_cast<float>(examples));
  grad_ = grad;  // only once the op succeeded: a failed Forward leaves none
  return loss;
}

Tensor SoftmaxCrossEntropyLoss::Backward() {
  TANDEM_CHECK(grad_.defined(), "softmax_cross_entropy: Backward before Forward");
  return grad_;
}

Tensor MseLoss::Forward(const Tensor& pred, const Tensor& target,
                        int64_t examples) {
  Tensor loss = Tensor::Empty({1}, pred.device());
  Tensor grad = Tensor::Empty(pred.shape(), pred.device(), pred.dtype());
  // Mean over all elements: examples x features per example.
  const int64_t rows = pred.rank() > 0 ? pred.dim(0) : 1;
  const int64_t per_example = rows > 0 ? pred.numel() / rows : 0;
  const float normalizer =
      examples > 0 ? static_cast<float>(examples * per_example) : 0.f;
  ops::Mse(pred, target, loss, &grad, normalizer);
  grad_ = grad;
  return loss;
}

Tensor MseLoss::Backward() {
  TANDEM_CHECK(grad_.defined(), "mse: Backward before Forward");
  return grad_;
}

}  // namespace tandem
