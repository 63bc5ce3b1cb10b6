// Linear: y = act(x W^T + b), with W [out, in] (PyTorch's layout) and an
// optional activation fused into the bias add (one pass instead of two).
//
//   Rng rng(0);
//   Linear fc("fc1", 784, 512, rng, LinearOptions{Activation::kRelu});
//   Tensor y = fc.Forward(x);          // x [batch, 784] -> y [batch, 512]
//   Tensor dx = fc.Backward(dy);       // adds into fc's weight/bias grads
//   fc.SetGradTarget(GradTarget::ApplySgd(0.1f));  // or: SGD in Backward
#ifndef TANDEM_LAYERS_LINEAR_H_
#define TANDEM_LAYERS_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"

namespace tandem {

enum class Init {
  kKaimingUniform,  // U(±sqrt(6 / in)): He init, for ReLU-family activations
  kKaimingNormal,   // N(0, 2 / in)
  kXavierUniform,   // U(±sqrt(6 / (in + out))): Glorot, for tanh / linear
  kXavierNormal,    // N(0, 2 / (in + out))
};
// Parses "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal".
Init ParseInit(const std::string& name);

struct LinearOptions {
  Activation activation = Activation::kIdentity;
  Init init = Init::kKaimingUniform;
  bool bias = true;
  Device device = Device::Cpu();
};

class Linear : public Layer {
 public:
  // Weights are drawn from `rng` on the host, so the same seed gives the same
  // model on every device and every rank.
  Linear(std::string name, int64_t in_features, int64_t out_features, Rng& rng,
         LinearOptions options = {});

  Tensor Forward(const Tensor& x) override;
  // Adds into (or, per grad_target(), overwrites) the weight and bias
  // gradients, or applies SGD to the weight and bias. The parameter work
  // runs on the device's side lane (Backend::BeginSideLane); join it before
  // reading gradients or parameters outside Tandem's ops.
  //
  // With kApplySgd the weight lives in two buffers that trade places every
  // Backward: the tensor weight() returns (and Parameters() points to) is
  // always the current one, but a CUDA graph captured from such steps bakes
  // in one step's pair of addresses, so graphs of an even number of steps
  // must be replayed in the order they were captured (gpu_step_bench does).
  Tensor Backward(const Tensor& dy) override;
  // Accepts every GradTarget.
  bool SetGradTarget(GradTarget target) override;
  std::vector<Parameter> Parameters() override;
  std::string Name() const override { return name_; }
  std::string Describe() const override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  std::string name_;
  int64_t in_;
  int64_t out_;
  LinearOptions options_;
  Tensor weight_, weight_grad_;  // [out, in]
  // kApplySgd: where Backward writes the updated weights, while the old ones
  // are still being read; swapped with weight_ after each Backward.
  Tensor weight_next_;
  Tensor bias_, bias_grad_;      // [out]
  Tensor input_;                 // [batch, in], from the last Forward
  // [batch, out]: x W^T + b for GELU and tanh, the output for ReLU (whose
  // gradient needs only the sign).
  Tensor pre_activation_;
  Tensor grad_output_;           // [batch, out], d loss / d (x W^T + b)
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_LINEAR_H_
