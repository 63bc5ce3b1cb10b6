// The layer norm of docs/custom_layers.md, built from public ops only
// (examples/custom_layer/row_norm.h): its gradients pass a finite-difference
// check, it matches Tandem's fused LayerNorm on every device, it casts
// bfloat16 tensors at its edges, and on a GPU its Forward and Backward make
// the host wait nowhere. GPU cases skip, saying why, where no GPU is visible.
#include "examples/custom_layer/row_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/rng.h"
#include "layers/gradient_check.h"
#include "layers/layer_norm.h"
#include "tests/support/device_test.h"
#ifdef TANDEM_COUNT_HOST_WAITS
#include "core/cuda/host_wait.h"
#endif

namespace tandem {
namespace {

using testing::DeviceTest;

Tensor RandomRows(int64_t rows, int64_t cols, uint64_t seed, Device device) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = rng.Uniform(-2.f, 2.f) + (i % cols == 0 ? 5.f : 0.f);
  return Tensor::FromVector(v, {rows, cols}, device);
}

double MaxDiff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.ToVector(), y = b.ToVector();
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
  return worst;
}

TEST(RowNormTest, GradientsPassAFiniteDifferenceCheck) {
  example::RowNorm norm("norm", 7, Device::Cpu());
  // Non-trivial affine parameters, so their gradients are probed too.
  norm.Parameters()[0].value() = RandomRows(1, 7, 3, Device::Cpu()).Reshape({7});
  norm.Parameters()[1].value() = RandomRows(1, 7, 4, Device::Cpu()).Reshape({7});
  EXPECT_LT(CheckLayerGradients(norm, RandomRows(5, 7, 1, Device::Cpu())), 1e-2);
}

class RowNormDeviceTest : public DeviceTest {};

TEST_P(RowNormDeviceTest, MatchesTheFusedLayerNorm) {
  example::RowNorm mine("norm", 300, device());
  LayerNorm fused("norm", 300, device());
  const Tensor x = RandomRows(33, 300, 1, device());
  const Tensor dy = RandomRows(33, 300, 2, device());
  EXPECT_LT(MaxDiff(mine.Forward(x), fused.Forward(x)), 1e-5);
  EXPECT_LT(MaxDiff(mine.Backward(dy), fused.Backward(dy)), 1e-4);
  for (int p = 0; p < 2; ++p) {
    EXPECT_LT(MaxDiff(mine.Parameters()[p].grad(), fused.Parameters()[p].grad()), 1e-3)
        << mine.Parameters()[p].name;
  }
}

// In a bf16 model (docs/custom_layers.md, rule 6) it casts its input and
// output gradient to float32: the results are the float32 layer's on the
// rounded values, in float32.
TEST_P(RowNormDeviceTest, CastsBfloat16AtItsEdges) {
  example::RowNorm mixed("norm", 7, device()), plain("norm", 7, device());
  const Tensor x = ops::ToDType(RandomRows(5, 7, 1, device()), DType::kBFloat16);
  const Tensor dy = ops::ToDType(RandomRows(5, 7, 2, device()), DType::kBFloat16);
  const Tensor y = mixed.Forward(x);
  const Tensor dx = mixed.Backward(dy);
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(dx.dtype(), DType::kFloat32);
  EXPECT_EQ(y.ToVector(), plain.Forward(ops::ToDType(x, DType::kFloat32)).ToVector());
  EXPECT_EQ(dx.ToVector(), plain.Backward(ops::ToDType(dy, DType::kFloat32)).ToVector());
  EXPECT_EQ(mixed.Parameters()[0].grad().ToVector(), plain.Parameters()[0].grad().ToVector());
}

TEST_P(RowNormDeviceTest, TheHostNeverWaits) {
  if (device().is_cpu()) GTEST_SKIP() << "the CPU is the host: nothing to wait for";
#ifdef TANDEM_COUNT_HOST_WAITS
  example::RowNorm norm("norm", 64, device());
  const Tensor x = RandomRows(16, 64, 1, device());
  const Tensor dy = RandomRows(16, 64, 2, device());
  const int64_t before = cuda::HostWaitCount();
  Tensor y = norm.Forward(x);
  Tensor dx = norm.Backward(dy);
  EXPECT_EQ(cuda::HostWaitCount(), before) << "Forward or Backward waited for the GPU";
  EXPECT_TRUE(std::isfinite(dx.ToVector()[0]));
#endif
}

INSTANTIATE_DEVICE_TEST_SUITE_P(RowNormDeviceTest);

}  // namespace
}  // namespace tandem
