#include "examples/custom_layer/swish.h"

#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "core/ops.h"
#ifdef EXAMPLE_WITH_CUDA
#include "core/cuda/user_kernels.h"
#include "examples/custom_layer/swish_kernels.h"
#endif

namespace example {
namespace {

using tandem::Tensor;

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Throws for a GPU tensor in a build without CUDA, naming the layer.
void NeedCudaBuild(const Tensor& x, const std::string& layer) {
#ifndef EXAMPLE_WITH_CUDA
  TANDEM_CHECK(!x.device().is_cuda())
      << "layer '" << layer << "' (Swish) got a tensor on " << x.device()
      << ", but was built without CUDA: rebuild where Bazel finds a CUDA "
         "toolkit, or run on the CPU";
#endif
}

}  // namespace

Tensor Swish::Forward(const Tensor& x_in) {
  NeedCudaBuild(x_in, name_);
  // The kernels take float32: a bf16 model's activations are cast at the edges.
  const Tensor x = tandem::ops::ToDType(x_in, tandem::DType::kFloat32);
  Tensor y = Tensor::Empty(x.shape(), x.device());
  if (x.device().is_cuda()) {
#ifdef EXAMPLE_WITH_CUDA
    tandem::cuda::LaneGuard on(x.backend().main_lane());
    CUDA_CHECK(LaunchSwishForward(x.data(), y.mutable_data(), x.numel(), on.stream()))
        << "layer '" << name_ << "' (Swish) forward";
#endif
  } else {
    const float* in = x.data();
    float* out = y.mutable_data();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] * Sigmoid(in[i]);
  }
  input_.Save(x);
  return y;
}

Tensor Swish::Backward(const Tensor& dy_in) {
  const Tensor& x = input_.Get(*this);
  const Tensor dy = tandem::ops::ToDType(dy_in, tandem::DType::kFloat32);
  TANDEM_CHECK(dy.shape() == x.shape() && dy.device() == x.device())
      << "layer '" << name_ << "' (Swish) got an output gradient "
      << tandem::ShapeToString(dy.shape()) << " on " << dy.device()
      << " for an input " << tandem::ShapeToString(x.shape()) << " on " << x.device();
  Tensor dx = Tensor::Empty(x.shape(), x.device());
  if (x.device().is_cuda()) {
#ifdef EXAMPLE_WITH_CUDA
    tandem::cuda::LaneGuard on(x.backend().main_lane());
    CUDA_CHECK(LaunchSwishBackward(x.data(), dy.data(), dx.mutable_data(), x.numel(),
                                   on.stream()))
        << "layer '" << name_ << "' (Swish) backward";
#endif
  } else {
    const float* in = x.data();
    const float* g = dy.data();
    float* out = dx.mutable_data();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float s = Sigmoid(in[i]);
      out[i] = g[i] * (s * (1.f + in[i] * (1.f - s)));
    }
  }
  return dx;
}

}  // namespace example
