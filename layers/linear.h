// Linear: y = act(x W^T + b), with W [out, in] (PyTorch's layout) and an
// optional activation fused into the bias add (one pass instead of two).
//
//   Rng rng(0);
//   Linear fc("fc1", 784, 512, rng, LinearOptions{Activation::kRelu});
//   Tensor y = fc.Forward(x);          // x [batch, 784] -> y [batch, 512]
//   Tensor dx = fc.Backward(dy);       // adds into fc's weight/bias grads
//
// An N-d input maps its last dimension, as PyTorch's nn.Linear does:
// x [..., in] -> y [..., out] (a transformer's [batch, T, C]). Every
// dimension before the last is folded into the rows of the same 2-D GEMMs
// by a Reshape view, so the N-d path copies nothing and computes what the
// 2-D path computes on x.Reshape({rows, in}), bit for bit.
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

struct LinearOptions {
  Activation activation = Activation::kIdentity;
  Init init = Init::kKaimingUniform;
  bool bias = true;
  Device device = Device::Cpu();
  // bf16: bfloat16 activations and working copies of the parameters,
  // float32 masters and gradients, where the device multiplies bfloat16;
  // tf32: TF32 GEMMs (layers/precision.h).
  Precision precision = Precision::kFp32;
};

class Linear : public Layer {
 public:
  // Weights are drawn from `rng` on the host, so the same seed gives the same
  // model on every device and every rank.
  Linear(std::string name, int64_t in_features, int64_t out_features, Rng& rng,
         LinearOptions options = {});

  // x [..., in] (rank 2 or more) -> [..., out], in the compute dtype.
  Tensor Forward(const Tensor& x) override;
  // dy [..., out], the shape of the last Forward's output -> dx [..., in].
  // On the main lane: BackwardWith(dy, BackwardArgs::For(device)), joined.
  Tensor Backward(const Tensor& dy) override;
  // The weight and bias gradients (or args.update's new values) are queued
  // on args.param_lane, beside the input-gradient GEMM on args.lane, or
  // before it when the two lanes are one; args.on_params_ready comes between
  // them. Nothing joins: the caller orders args.lane after args.param_lane
  // before reading the gradients (Sequential::Backward does).
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  std::vector<NamedParameter> Parameters() override;
  std::string Name() const override { return name_; }
  std::string Describe() const override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Tensor& weight() { return weight_.value(); }
  Tensor& bias() { return bias_.value(); }

 private:
  std::string name_;
  int64_t in_;
  int64_t out_;
  LinearOptions options_;
  // Forward of x [rows, in] -> [rows, out]: every input, as a view.
  Tensor Forward2D(const Tensor& x);
  void CheckBackward(const Tensor& dy) const;
  // The dtype of activations and working copies on the parameters' device.
  DType compute_dtype() const { return policy_.compute_dtype(weight_.value().backend()); }
  bool has_working_copies() const { return policy_.has_working_copies(weight_.value().backend()); }
  // What the GEMMs read: the working copies where kept, the masters otherwise.
  const Tensor& weight_for_math() const { return has_working_copies() ? weight_.working() : weight_.value(); }
  const Tensor& bias_for_math() const { return has_working_copies() ? bias_.working() : bias_.value(); }
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
  void MakeGradients(const Lane& lane);
  void ParameterGradients(const BackwardArgs& args, const PreActivationGrad& grad);
  // dz W on args.lane; undefined when args.input_grad is false.
  Tensor InputGradient(const BackwardArgs& args, const Tensor& dz);
  // See Note [What Backward keeps] in linear.cc.
  void DropBackwardState(const BackwardArgs& args, const Tensor& dz);
  // Marks `t`, which args.param_lane reads, as used there (RecordLane).
  void UsedOnParamLane(const BackwardArgs& args, const Tensor& t);

  PrecisionPolicy policy_;
  // [out, in] and [out], float32, each with its gradient and, under bf16,
  // its working copy (an empty placeholder where not kept).
  Parameter weight_, bias_;
  SavedTensor input_{"input"};   // [rows, in], from the last Forward, in the compute dtype
  // The last Forward's input shape, [..., in]: rows is the product of all
  // but its last dimension.
  Shape input_shape_;
  // [rows, out]: x W^T + b for GELU and tanh, the output for ReLU (whose
  // gradient needs only the sign); nothing for the identity.
  SavedTensor pre_activation_;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_LINEAR_H_
