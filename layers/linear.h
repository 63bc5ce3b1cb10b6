// Linear: y = act(x W^T + b), with W [out, in] (PyTorch's layout) and an
// optional activation fused into the bias add (one pass instead of two).
//
//   Rng rng(0);
//   Linear fc("fc1", 784, 512, rng, LinearOptions{Activation::kRelu});
//   Tensor y = fc.Forward(x);          // x [batch, 784] -> y [batch, 512]
//   Tensor dx = fc.Backward(dy);       // adds into fc's weight/bias grads
#ifndef TANDEM_LAYERS_LINEAR_H_
#define TANDEM_LAYERS_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/precision.h"
#include "layers/saved_tensor.h"

namespace tandem {

enum class Init {
  kKaimingUniform,  // U(±sqrt(6 / in)): He init, for ReLU-family activations
  kKaimingNormal,   // N(0, 2 / in)
  kXavierUniform,   // U(±sqrt(6 / (in + out))): Glorot, for tanh / linear
  kXavierNormal,    // N(0, 2 / (in + out))
};
// Parses "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal".
Init ParseInit(const std::string& name);

// Note [Float32 operands where bfloat16 is widened]
// Rule: in bf16, what leaves a Linear (its output and its input gradient)
// is bfloat16. Where the device multiplies bfloat16
// (Backend::MultipliesBFloat16), the layer's GEMMs read bfloat16: a working
// copy of the weight, the input and output gradient cast to bfloat16, and
// dz (the gradient before the activation) in bfloat16. Where the device
// widens bfloat16 to float32 (a CPU without bfloat16 dot products), they
// read float32 wherever the layer holds or is given it: the float32 master
// weight (the layer keeps no working copy of it), a float32 input (data)
// and output gradient (a loss's) as given, and dz, which the layer then
// computes in float32. Only the bfloat16 activations and input gradients
// that other layers hand it are widened. The bias is bfloat16 either way.
// Why: where bfloat16 is widened the GEMM multiplies in float32 whatever it
// is given, so rounding to bfloat16 what it would widen back costs a pass
// each way (over every weight, in the optimizer and in two GEMMs a step)
// and precision. The gain is measured in docs/benchmarks.md ("bf16 on a CPU
// with AVX-512 BF16").
// Consequence: on such a CPU a bf16 model computes more in float32 than a
// bfloat16 GEMM does, so its results differ from one's by more than
// summation order; both are held to the same bf16 tolerances against fp32.
// Mechanism: WidensBFloat16() asks the weight's backend; Parameters() and
// weight_for_math() follow it; MoveTo rebuilds working copies on the new
// device (layers/layer.h).
struct LinearOptions {
  Activation activation = Activation::kIdentity;
  Init init = Init::kKaimingUniform;
  bool bias = true;
  Device device = Device::Cpu();
  // bf16: bfloat16 activations and working copies of the weights (Note
  // [Float32 operands where bfloat16 is widened]), float32 masters and
  // gradients; tf32: TF32 GEMMs (layers/precision.h).
  Precision precision = Precision::kFp32;
};

class Linear : public Layer {
 public:
  // Weights are drawn from `rng` on the host, so the same seed gives the same
  // model on every device and every rank.
  Linear(std::string name, int64_t in_features, int64_t out_features, Rng& rng,
         LinearOptions options = {});

  Tensor Forward(const Tensor& x) override;
  // On the main lane: BackwardWith(dy, BackwardArgs::For(device)), joined.
  Tensor Backward(const Tensor& dy) override;
  // The weight and bias gradients (or args.update's new values) are queued
  // on args.param_lane, beside the input-gradient GEMM on args.lane, or
  // before it when the two lanes are one; args.on_params_ready comes between
  // them. Nothing joins: the caller orders args.lane after args.param_lane
  // before reading the gradients (Sequential::Backward does).
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
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
  void CheckBackward(const Tensor& dy) const;
  // Note [Float32 operands where bfloat16 is widened].
  bool WidensBFloat16() const {
    return policy_.has_working_copies() && !weight_.backend().MultipliesBFloat16();
  }
  bool KeepsWeightWorkingCopy() const {
    return policy_.has_working_copies() && !WidensBFloat16();
  }
  // `t` as the GEMMs read it: in the compute dtype (a cast when it is not),
  // or as it is where WidensBFloat16().
  Tensor ForGemms(const Lane& lane, const Tensor& t) const;
  // dz's dtype for an output gradient of `dy_dtype`.
  DType PreActivationGradDType(DType dy_dtype) const {
    return WidensBFloat16() ? DType::kFloat32 : dy_dtype;
  }
  // What the GEMMs read: the working copies where kept, the masters otherwise.
  const Tensor& weight_for_math() const {
    return KeepsWeightWorkingCopy() ? weight_work_ : weight_;
  }
  const Tensor& bias_for_math() const {
    return policy_.has_working_copies() ? bias_work_ : bias_;
  }
  // Whether the bias gradient comes out of the activation's gradient pass.
  bool BiasSummedWithActivation() const {
    return options_.bias && options_.activation != Activation::kIdentity;
  }
  // dz = d loss / d (x W^T + b), on args.lane; when
  // BiasSummedWithActivation(), the bias gradient too, from the same pass:
  // into the bias gradient, or, with args.update, into bias_sums.
  struct PreActivationGrad {
    Tensor dz;
    Tensor bias_sums;  // float32 [out], with args.update only
  };
  PreActivationGrad PreActivationGradient(const BackwardArgs& args, const Tensor& dy);
  // The weight and bias gradients (or updates), on args.param_lane.
  void ParameterGradients(const BackwardArgs& args, const PreActivationGrad& grad);
  // dz W on args.lane; undefined when args.input_grad is false.
  Tensor InputGradient(const BackwardArgs& args, const Tensor& dz);
  // See Note [What Backward keeps] in linear.cc.
  void DropBackwardState(const BackwardArgs& args, Tensor dz);
  // Keeps `t`, which args.param_lane reads, while that lane may still run.
  void KeepForParamLane(const BackwardArgs& args, Tensor t);

  PrecisionPolicy policy_;
  Tensor weight_, weight_grad_;  // [out, in], float32
  Tensor bias_, bias_grad_;      // [out], float32
  // bf16 working copies (bf16 only; the weight's an empty placeholder where
  // not kept).
  Tensor weight_work_, bias_work_;
  SavedTensor input_{"input"};   // [batch, in], from the last Forward, as ForGemms gives it
  // [batch, out]: x W^T + b for GELU and tanh, the output for ReLU (whose
  // gradient needs only the sign); nothing for the identity.
  SavedTensor pre_activation_;
  // The last Backward's input and dz, while its parameter lane may still
  // read them, until the next Forward or Backward (Note [What Backward keeps] in linear.cc).
  std::vector<Tensor> kept_for_param_lane_;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_LINEAR_H_
