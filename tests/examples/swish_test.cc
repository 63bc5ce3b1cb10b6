// The layer with CUDA kernels of its own (examples/custom_layer/swish.h):
// hand-computed values and a finite-difference check on the CPU; on every
// device, bfloat16 tensors cast at its edges; on a GPU, its kernels match the
// CPU within 1e-6 relative and run in order with the work queued before them
// on the lane. GPU cases skip, saying why, where no
// GPU is visible.
#include "examples/custom_layer/swish.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/gradient_check.h"
#include "tests/support/device_test.h"
#ifdef EXAMPLE_WITH_CUDA
#include "core/backend_registry.h"
#include "core/cuda/user_kernels.h"
#include "tests/support/device_stall.h"
#endif

namespace tandem {
namespace {

using testing::DeviceTest;

std::vector<float> RandomValues(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = rng.Uniform(-6.f, 6.f);
  return v;
}

// The largest |a - b| / max(|b|, 1): relative for values of at least 1,
// absolute below (dx crosses 0 where swish has its minimum, x = -1.28).
double MaxRelativeDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(1.0, std::fabs(double(b[i])));
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / scale);
  }
  return worst;
}

TEST(SwishTest, MatchesHandComputedValues) {
  example::Swish act("act");
  const Tensor x = Tensor::FromVector({0.f, 1.f, -1.f, 2.f}, {2, 2});
  // sigmoid(1) = 0.7310586, sigmoid(-1) = 0.2689414, sigmoid(2) = 0.8807971
  const std::vector<float> y = act.Forward(x).ToVector();
  const std::vector<float> want_y = {0.f, 0.7310586f, -0.2689414f, 1.7615942f};
  // dy * s * (1 + x * (1 - s)) with dy = 2
  const std::vector<float> dx = act.Backward(Tensor::Full({2, 2}, 2.f)).ToVector();
  const std::vector<float> want_dx = {1.f, 1.8553410f, 0.1446590f, 2.1815685f};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], want_y[i], 1e-6) << "y[" << i << "]";
    EXPECT_NEAR(dx[i], want_dx[i], 2e-6) << "dx[" << i << "]";
  }
}

TEST(SwishTest, GradientsPassAFiniteDifferenceCheck) {
  example::Swish act("act");
  const Tensor x = Tensor::FromVector(RandomValues(24, 1), {4, 6});
  EXPECT_LT(CheckLayerGradients(act, x), 1e-2);
}

class SwishDeviceTest : public DeviceTest {};

// Forward and Backward on device() against the CPU loop: on a GPU this
// compares the layer's own kernels with the host.
TEST_P(SwishDeviceTest, MatchesTheCpu) {
  const Shape shape = {31, 97};  // not a multiple of a block
  const std::vector<float> x = RandomValues(NumElements(shape), 2);
  const std::vector<float> dy = RandomValues(NumElements(shape), 3);
  example::Swish cpu("act"), mine("act");
  const std::vector<float> want_y = cpu.Forward(Tensor::FromVector(x, shape)).ToVector();
  const std::vector<float> want_dx = cpu.Backward(Tensor::FromVector(dy, shape)).ToVector();
  const std::vector<float> y = mine.Forward(Tensor::FromVector(x, shape, device())).ToVector();
  const std::vector<float> dx =
      mine.Backward(Tensor::FromVector(dy, shape, device())).ToVector();
  EXPECT_LT(MaxRelativeDiff(y, want_y), 1e-6);
  EXPECT_LT(MaxRelativeDiff(dx, want_dx), 1e-6);
  // An empty tensor launches nothing and is no error.
  EXPECT_EQ(mine.Forward(Tensor::Empty({0, 4}, device())).numel(), 0);
}

// In a bf16 model (docs/custom_layers.md, rule 6) it casts its input and
// output gradient to float32: the results are the float32 layer's on the
// rounded values, in float32.
TEST_P(SwishDeviceTest, CastsBfloat16AtItsEdges) {
  const Shape shape = {3, 5};
  const Tensor x = Tensor::FromVector(RandomValues(15, 4), shape, device(), DType::kBFloat16);
  const Tensor dy = Tensor::FromVector(RandomValues(15, 5), shape, device(), DType::kBFloat16);
  example::Swish mixed("act"), plain("act");
  const Tensor y = mixed.Forward(x);
  const Tensor dx = mixed.Backward(dy);
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(dx.dtype(), DType::kFloat32);
  EXPECT_EQ(y.ToVector(), plain.Forward(ops::ToDType(x, DType::kFloat32)).ToVector());
  EXPECT_EQ(dx.ToVector(), plain.Backward(ops::ToDType(dy, DType::kFloat32)).ToVector());
}

INSTANTIATE_DEVICE_TEST_SUITE_P(SwishDeviceTest);

#ifdef EXAMPLE_WITH_CUDA
TEST(SwishCudaTest, StreamOfRefusesACpuLaneNamingIt) {
  const Lane cpu = GetBackend(Device::Cpu()).main_lane();
  try {
    cuda::StreamOf(cpu);
    FAIL() << "StreamOf gave a stream for the " << cpu.Describe();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("launched on the cpu main lane, which has no CUDA stream"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cuda::StreamOf(Lane()), Error);
}

// The kernel goes on the main lane's stream: held behind a stalled lane, it
// reads what the op queued before it wrote, not the older values.
TEST(SwishCudaTest, KernelsRunInOrderOnTheLane) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU: " << CudaUnavailableReason();
  const Device gpu = Device::Cuda(0);
  const std::vector<float> values = RandomValues(4096, 4);
  example::Swish act("act");
  Tensor x = Tensor::FromVector(values, {4096}, gpu);
  // Every kernel once before the lane is held: CUDA loads a kernel's module
  // at its first launch, which waits for the device (and the allocator's
  // first cudaMalloc of a size may too).
  act.Forward(x);
  ops::AddScalar(x, 0.f, x);
  {
    testing::DeviceStall stall(gpu);
    stall.Hold(x.backend().main_lane());
    ops::AddScalar(x, 1.f, x);  // queued behind the stall
    Tensor y = act.Forward(x);  // must read x + 1
    stall.Release();
    std::vector<float> shifted = values;
    for (float& v : shifted) v += 1.f;
    example::Swish cpu("act");
    const std::vector<float> want = cpu.Forward(Tensor::FromVector(shifted, {4096})).ToVector();
    EXPECT_LT(MaxRelativeDiff(y.ToVector(), want), 1e-6)
        << "the kernel did not wait for the op queued before it on the lane";
  }
}
#endif  // EXAMPLE_WITH_CUDA

}  // namespace
}  // namespace tandem
