// A layer with CUDA kernels of its own: Swish, y = x * sigmoid(x). On a GPU
// its Forward and Backward launch the kernels of swish_kernels.cu on the
// stream of the main lane of the tensor's device (core/cuda/user_kernels.h),
// so they run in order with the ops queued there and the host never waits;
// on the CPU a plain loop computes the same. docs/custom_layers.md walks
// through it.
//
//   example::Swish act("act");
//   Tensor y = act.Forward(x);        // x any shape, CPU or GPU
//   Tensor dx = act.Backward(dy);
//
// Its kernels compute in float32: in a bf16 model it casts its input and
// output gradient to float32, and returns float32 (docs/custom_layers.md,
// rule 6).
//
// Built without CUDA (Bazel found no toolkit), the layer still runs on the
// CPU; there are then no GPU tensors to give it.
#ifndef TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_H_
#define TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_H_

#include <string>

#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace example {

class Swish : public tandem::Layer {
 public:
  explicit Swish(std::string name) : name_(std::move(name)) {}

  // x: any shape, float32 or bfloat16; y is float32.
  tandem::Tensor Forward(const tandem::Tensor& x) override;
  // dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x) of the last Forward.
  tandem::Tensor Backward(const tandem::Tensor& dy) override;

  std::string Name() const override { return name_; }
  std::string Describe() const override { return name_ + " (Swish)"; }

 private:
  std::string name_;
  tandem::SavedTensor input_{"input"};
};

}  // namespace example

#endif  // TANDEM_EXAMPLES_CUSTOM_LAYER_SWISH_H_
