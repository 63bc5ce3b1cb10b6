// This workspace's own layer through Tandem's public targets: its Backward
// agrees with central differences of its Forward (Tandem's gradient check),
// on the CPU and on a GPU, and it learns the gains of a target it can fit.
#include "scaled_tanh.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/backend_registry.h"
#include "core/rng.h"
#include "layers/gradient_check.h"
#include "layers/loss.h"
#include "layers/optimizer.h"

namespace consumer {
namespace {

Tensor NormalInput(int64_t rows, int64_t cols, tandem::Device device, uint64_t seed) {
  tandem::Rng rng(seed);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = rng.Normal();
  return Tensor::FromVector(v, {rows, cols}, device);
}

void CheckGradients(tandem::Device device) {
  ScaledTanh layer("act", 5, device);
  const Tensor x = NormalInput(4, 5, device, /*seed=*/1);
  tandem::CompareLayerGradients(layer, x).Require(1e-2);  // throws if off
}

TEST(ScaledTanhTest, GradientsOnCpu) { CheckGradients(tandem::Device::Cpu()); }

TEST(ScaledTanhTest, GradientsOnGpu) {
  if (tandem::CudaDeviceCount() == 0) {
    GTEST_SKIP() << "skipping the CUDA gradient check: " << tandem::CudaUnavailableReason();
  }
  CheckGradients(tandem::Device::Cuda(0));
}

// The target is want * tanh(x), so the gains that fit it are `want`.
TEST(ScaledTanhTest, LearnsItsGains) {
  const std::vector<float> want = {0.5f, 1.5f, 2.f, -1.f};
  const Tensor x = NormalInput(256, 4, tandem::Device::Cpu(), /*seed=*/2);
  std::vector<float> target = x.ToVector();
  for (size_t i = 0; i < target.size(); ++i) target[i] = want[i % 4] * std::tanh(target[i]);
  const Tensor y = Tensor::FromVector(target, x.shape());

  ScaledTanh layer("act", 4);
  tandem::SgdParams sgd_params;
  sgd_params.lr = 2.f;
  tandem::Sgd sgd(layer.Parameters(), sgd_params);
  tandem::MseLoss loss;
  for (int step = 0; step < 100; ++step) {
    sgd.ZeroGrad();
    loss.Forward(layer.Forward(x), y);
    layer.Backward(loss.Backward());
    sgd.Step();
  }
  const std::vector<float> gains = layer.Parameters()[0].value().ToVector();
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(gains[j], want[j], 1e-3) << "gain " << j;
}

}  // namespace
}  // namespace consumer
