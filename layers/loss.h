// Losses. Forward computes the loss and, fused in the same pass, the gradient
// that Backward returns.
//
//   SoftmaxCrossEntropyLoss ce;
//   Tensor loss = ce.Forward(logits, labels);   // [1], on logits' device
//   Tensor dlogits = ce.Backward();
//   float value = loss.Item();                  // waits for the device
//
// `examples` is the number of examples the loss is averaged over; 0 means this
// batch. Data parallelism passes the global batch size, so that summing the
// workers' gradients gives the gradient of the global-batch mean even when the
// last batch splits unevenly.
#ifndef TANDEM_LAYERS_LOSS_H_
#define TANDEM_LAYERS_LOSS_H_

#include <string>

#include "core/tensor.h"

namespace tandem {

class Loss {
 public:
  virtual ~Loss() = default;
  // Returns the loss, a [1] tensor on pred's device.
  virtual Tensor Forward(const Tensor& pred, const Tensor& target,
                         int64_t examples = 0) = 0;
  // Gradient of the last Forward's loss with respect to pred.
  virtual Tensor Backward() = 0;
  virtual std::string Name() const = 0;
};

// Mean over examples of -log softmax(logits)[label]; targets are class
// indices stored as floats, [batch].
class SoftmaxCrossEntropyLoss : public Loss {
 public:
  Tensor Forward(const Tensor& logits, const Tensor& labels,
                 int64_t examples = 0) override;
  Tensor Backward() override;
  std::string Name() const override { return "softmax_cross_entropy"; }

 private:
  Tensor grad_;
};

// Mean over examples and features of (pred - target)^2 (PyTorch's MSELoss
// with reduction='mean').
class MseLoss : public Loss {
 public:
  Tensor Forward(const Tensor& pred, const Tensor& target,
                 int64_t examples = 0) override;
  Tensor Backward() override;
  std::string Name() const override { return "mse"; }

 private:
  Tensor grad_;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_LOSS_H_
