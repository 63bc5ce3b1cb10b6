// A user-defined layer, written only against Tandem's public API
// (core/ops.h, core/tensor.h, layers/layer.h, layers/saved_tensor.h): y = x A^T B^T, a linear map
// factored through `rank` dimensions (in*rank + rank*out weights instead of
// in*out). It runs on CPU and GPU without knowing which, and trains like any
// built-in layer, in a float32 or a bf16 model (it computes in float32 and
// casts at its edges). docs/custom_layers.md walks through it.
#ifndef TANDEM_EXAMPLES_CUSTOM_LAYER_LOW_RANK_LINEAR_H_
#define TANDEM_EXAMPLES_CUSTOM_LAYER_LOW_RANK_LINEAR_H_

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace example {

using tandem::Tensor;

class LowRankLinear : public tandem::Layer {
 public:
  LowRankLinear(std::string name, int64_t in, int64_t out, int64_t rank,
                tandem::Rng& rng, tandem::Device device = tandem::Device::Cpu())
      : name_(std::move(name)), in_(in) {
    // Gradients start as zeros of the value's shape.
    a_ = tandem::Parameter(Random({rank, in}, std::sqrt(3.f / in), rng, device));     // [rank, in]
    b_ = tandem::Parameter(Random({out, rank}, std::sqrt(3.f / rank), rng, device));  // [out, rank]
  }

  Tensor Forward(const Tensor& x) override {  // x [batch, in]
    TANDEM_CHECK(x.rank() == 2 && x.dim(1) == in_)
        << "layer '" << name_ << "' got input " << tandem::ShapeToString(x.shape())
        << ": expected [batch, " << in_ << "]";
    const Tensor x32 = tandem::ops::ToDType(x, tandem::DType::kFloat32);  // bf16 models too
    Tensor h = Tensor::Empty({x.dim(0), a_.value().dim(0)}, x.device());
    tandem::ops::Gemm(x32, false, a_.value(), true, h);  // h = x A^T   [batch, rank]
    Tensor y = Tensor::Empty({x.dim(0), b_.value().dim(0)}, x.device());
    tandem::ops::Gemm(h, false, b_.value(), true, y);    // y = h B^T   [batch, out]
    input_.Save(x32);  // rule 7: after the layer's own writes
    hidden_.Save(h);
    return y;
  }

  Tensor Backward(const Tensor& dy_in) override {  // dy [batch, out]
    const Tensor dy = tandem::ops::ToDType(dy_in, tandem::DType::kFloat32);
    const Tensor& x = input_.Get(*this);  // throws if written since Forward
    const Tensor& h = hidden_.Get(*this);
    tandem::ops::Gemm(dy, true, h, false, b_.grad(), 1.f, 1.f);    // dB += dy^T h
    Tensor dh = Tensor::Empty(h.shape(), dy.device());
    tandem::ops::Gemm(dy, false, b_.value(), false, dh);             // dh = dy B
    tandem::ops::Gemm(dh, true, x, false, a_.grad(), 1.f, 1.f);    // dA += dh^T x
    Tensor dx = Tensor::Empty(x.shape(), dy.device());
    tandem::ops::Gemm(dh, false, a_.value(), false, dx);             // dx = dh A
    return dx;
  }

  std::vector<tandem::NamedParameter> Parameters() override {
    return {{name_ + ".a", &a_}, {name_ + ".b", &b_}};
  }
  std::string Name() const override { return name_; }

 private:
  static Tensor Random(const tandem::Shape& shape, float bound, tandem::Rng& rng,
                       tandem::Device device) {
    std::vector<float> v(tandem::NumElements(shape));
    for (float& w : v) w = rng.Uniform(-bound, bound);
    return Tensor::FromVector(v, shape, device);
  }

  std::string name_;
  int64_t in_;
  tandem::Parameter a_, b_;  // each owns its weights and their gradient
  tandem::SavedTensor input_{"input"};    // saved by Forward for Backward:
  tandem::SavedTensor hidden_{"hidden"};  // x in float32, and h = x A^T
};

}  // namespace example

#endif  // TANDEM_EXAMPLES_CUSTOM_LAYER_LOW_RANK_LINEAR_H_
