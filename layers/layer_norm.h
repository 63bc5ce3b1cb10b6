// LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias over the
// features of each row, with the population variance (PyTorch's
// nn.LayerNorm over the last dimension, its parameter names and shapes).
//
//   LayerNorm ln("ln1", 64, device);      // weight ones, bias zeros, [64]
//   Tensor y = ln.Forward(x);              // x [rows, 64] -> y [rows, 64]
//   Tensor dx = ln.Backward(dy);           // adds into ln1.weight / ln1.bias grads
//
// An N-d input [..., 64] (a transformer's [batch, T, C]) normalises its last
// dimension: its leading dimensions are the rows, folded by a Reshape view.
//
// Each pass is one fused op (core/ops_layer_norm.h): on a GPU one block per
// row. The statistics are float32 whatever the precision; in bf16
// (layers/precision.h) activations and the working copies of weight and
// bias are bfloat16, masters and gradients float32.
#ifndef TANDEM_LAYERS_LAYER_NORM_H_
#define TANDEM_LAYERS_LAYER_NORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/precision.h"
#include "layers/saved_tensor.h"

namespace tandem {

struct LayerNormOptions {
  // Added to the variance, so a constant row stays finite.
  float eps = 1e-5f;
  // bf16: bfloat16 activations and working copies, float32 masters,
  // gradients and statistics, where the device multiplies bfloat16
  // (layers/precision.h).
  Precision precision = Precision::kFp32;
};

class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, int64_t features, Device device, LayerNormOptions options = {});

  // x [rows, features] -> y [rows, features], in the compute dtype (a
  // float32 input is cast to bfloat16 in bf16, and back); x [..., features]
  // -> y [..., features] likewise.
  Tensor Forward(const Tensor& x) override;
  // dy of the last Forward's input shape: adds into the weight and bias
  // gradients and returns dx of that shape, on the main lane.
  Tensor Backward(const Tensor& dy) override;
  // The full protocol (layers/layer.h), on args.lane: the gradients of
  // weight and bias and dx in one fused pass, then args.on_params_ready.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  // "<name>.weight" and "<name>.bias", [features].
  std::vector<NamedParameter> Parameters() override;
  std::string Name() const override { return name_; }
  // "ln1 (LayerNorm 64)", with the precision when not fp32.
  std::string Describe() const override;

  int64_t features() const { return features_; }
  float eps() const { return options_.eps; }
  Tensor& weight() { return weight_.value(); }
  Tensor& bias() { return bias_.value(); }

 private:
  // The dtype of activations and working copies on the parameters' device.
  DType compute_dtype() const { return policy_.compute_dtype(weight_.value().backend()); }
  bool has_working_copies() const { return policy_.has_working_copies(weight_.value().backend()); }
  const Tensor& weight_for_math() const { return has_working_copies() ? weight_.working() : weight_.value(); }
  const Tensor& bias_for_math() const { return has_working_copies() ? bias_.working() : bias_.value(); }

  std::string name_;
  int64_t features_;
  LayerNormOptions options_;
  PrecisionPolicy policy_;
  // [features], float32, with bfloat16 working copies under bf16 (may be
  // placeholders).
  Parameter weight_, bias_;
  // From the last Forward, for Backward: the input in the compute dtype,
  // and each row's mean and 1 / sqrt(var + eps), float32 [rows].
  SavedTensor input_{"input"};  // [rows, features]
  Tensor mean_, rstd_;
  Shape input_shape_;  // the last Forward's, [..., features]
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_LAYER_NORM_H_
