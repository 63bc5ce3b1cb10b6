#include "layers/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "layers/gradient_check.h"
#include "layers/optimizer.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class LinearTest : public DeviceTest {
 protected:
  Tensor RandomInput(int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(rows * cols);
    for (float& x : v) x = rng.Normal();
    return Tensor::FromVector(v, {rows, cols}, device());
  }
};

TEST_P(LinearTest, ForwardHandValues) {
  Rng rng(0);
  LinearOptions o;
  o.device = device();
  Linear fc("fc", 3, 2, rng, o);
  fc.weight().CopyFrom(Tensor::FromVector({1, 0, -1, 2, 1, 0}, {2, 3}));
  fc.bias().CopyFrom(Tensor::FromVector({0.5f, -1}, {2}));
  Tensor x = Tensor::FromVector({1, 2, 3, -1, 0, 1}, {2, 3}, device());
  // row 0: [1-3, 2+2] + b = [-1.5, 3]; row 1: [-1-1, -2] + b = [-1.5, -3]
  EXPECT_EQ(fc.Forward(x).ToVector(), (std::vector<float>{-1.5f, 3, -1.5f, -3}));
}

TEST_P(LinearTest, GradientsAllActivations) {
  for (Activation act : kActivations) {
    Rng rng(1);
    LinearOptions o;
    o.activation = act;
    o.device = device();
    Linear fc(std::string("fc_") + ActivationName(act), 7, 5, rng, o);
    EXPECT_LT(CheckLayerGradients(fc, RandomInput(4, 7, 2)), 1e-2)
        << ActivationName(act);
  }
}

TEST_P(LinearTest, BackwardAccumulatesIntoGradients) {
  Rng rng(3);
  LinearOptions o;
  o.device = device();
  Linear fc("fc", 4, 3, rng, o);
  Tensor x = RandomInput(2, 4, 4);
  Tensor dy = RandomInput(2, 3, 5);
  ZeroGrad(fc);
  fc.Forward(x);
  fc.Backward(dy);
  const std::vector<float> once = fc.Parameters()[0].grad().ToVector();
  fc.Forward(x);
  fc.Backward(dy);
  const std::vector<float> twice = fc.Parameters()[0].grad().ToVector();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-5);
}

// Backward with args, then joined: what a caller does before reading.
Tensor BackwardJoined(Layer& layer, const Tensor& dy, const BackwardArgs& args) {
  Tensor dx = layer.BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

// kOverwrite writes what one backward pass gives, however often it runs; an
// in-backward SGD update (Sgd::in_backward) returns the same input gradient
// and, after Step, leaves the parameters moved by -lr times the gradients.
TEST_P(LinearTest, OverwriteAndSgdInBackward) {
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  Tensor x = RandomInput(5, 4, 4);
  Tensor dy = RandomInput(5, 3, 5);
  Rng rng_a(3), rng_b(3);
  Linear reference("fc", 4, 3, rng_a, o), fused("fc", 4, 3, rng_b, o);
  BackwardArgs overwrite = BackwardArgs::For(device());
  overwrite.grad_mode = GradMode::kOverwrite;
  ops::Fill(reference.Parameters()[0].grad(), 123.f);  // garbage to overwrite
  reference.Forward(x);
  BackwardJoined(reference, dy, overwrite);
  reference.Forward(x);
  const std::vector<float> dx_ref = BackwardJoined(reference, dy, overwrite).ToVector();
  const std::vector<float> w0 = reference.weight().ToVector(), b0 = reference.bias().ToVector();
  const std::vector<float> dw = reference.Parameters()[0].grad().ToVector();
  const std::vector<float> db = reference.Parameters()[1].grad().ToVector();

  ZeroGrad(reference);
  reference.Forward(x);
  reference.Backward(dy);
  const std::vector<float> dw_once = reference.Parameters()[0].grad().ToVector();
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], dw_once[i], 1e-5) << i;

  const float lr = 0.25f;
  SgdParams plain;
  plain.lr = lr;
  Sgd sgd(fused.Parameters(), plain);
  BackwardArgs update = BackwardArgs::For(device());
  update.update = sgd.in_backward();
  ASSERT_NE(update.update, nullptr);
  fused.Forward(x);
  const std::vector<float> dx = BackwardJoined(fused, dy, update).ToVector();
  sgd.Step();
  ASSERT_EQ(dx.size(), dx_ref.size());
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], dx_ref[i], 1e-5) << i;
  const std::vector<float> w1 = fused.weight().ToVector(), b1 = fused.bias().ToVector();
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(w1[i], w0[i] - lr * dw[i], 1e-5) << i;
  for (size_t i = 0; i < b1.size(); ++i) EXPECT_NEAR(b1[i], b0[i] - lr * db[i], 1e-5) << i;
  // Updated in Backward: no gradients kept.
  EXPECT_FALSE(fused.Parameters()[0].grad().defined());
  EXPECT_FALSE(fused.Parameters()[1].grad().defined());
  // A second step starts from the updated weights. Expected: the gradient
  // at (w1, b1).
  fused.Forward(x);
  BackwardJoined(fused, dy, update);
  sgd.Step();
  reference.weight().CopyFrom(Tensor::FromVector(w1, reference.weight().shape()));
  reference.bias().CopyFrom(Tensor::FromVector(b1, reference.bias().shape()));
  reference.Forward(x);
  BackwardJoined(reference, dy, overwrite);
  const std::vector<float> dw1 = reference.Parameters()[0].grad().ToVector();
  const std::vector<float> w2 = fused.weight().ToVector();
  for (size_t i = 0; i < w2.size(); ++i) EXPECT_NEAR(w2[i], w1[i] - lr * dw1[i], 1e-5) << i;
  // A later Backward that adds into the gradients makes them again, zeroed.
  reference.weight().CopyFrom(fused.weight());
  reference.bias().CopyFrom(fused.bias());
  fused.Forward(x);
  fused.Backward(dy);
  reference.Forward(x);
  BackwardJoined(reference, dy, overwrite);
  const std::vector<float> dw2 = fused.Parameters()[0].grad().ToVector();
  const std::vector<float> dw2_ref = reference.Parameters()[0].grad().ToVector();
  for (size_t i = 0; i < dw2.size(); ++i) EXPECT_NEAR(dw2[i], dw2_ref[i], 1e-5) << i;
}

// Parameter work on the main lane (before the input gradient) instead of
// the side lane: the same GEMMs run on the same data, so every result is
// bitwise the same, for both gradient modes; on_params_ready comes once,
// and input_grad = false returns no input gradient.
TEST_P(LinearTest, ParameterLaneChangesNoResult) {
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  Tensor x = RandomInput(6, 5, 7);
  Tensor dy = RandomInput(6, 4, 8);
  for (GradMode mode : {GradMode::kAccumulate, GradMode::kOverwrite}) {
    Rng rng_a(9), rng_b(9);
    Linear beside("fc", 5, 4, rng_a, o), first("fc", 5, 4, rng_b, o);
    BackwardArgs beside_args = BackwardArgs::For(device());
    beside_args.grad_mode = mode;
    BackwardArgs first_args = beside_args;
    first_args.param_lane = first_args.lane;
    int ready = 0;
    first_args.on_params_ready = [&ready] { ++ready; };
    for (int step = 0; step < 2; ++step) {  // twice: accumulate adds
      beside.Forward(x);
      first.Forward(x);
      EXPECT_EQ(BackwardJoined(first, dy, first_args).ToVector(),
                BackwardJoined(beside, dy, beside_args).ToVector());
    }
    EXPECT_EQ(ready, 2);
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(first.Parameters()[p].grad().ToVector(), beside.Parameters()[p].grad().ToVector())
          << "parameter " << p;
    }
    first_args.input_grad = false;
    first.Forward(x);
    EXPECT_FALSE(BackwardJoined(first, dy, first_args).defined());
  }
}

// Backward hands back what Forward kept (the input, the ReLU output, dz)
// as it returns when the parameter work shares its lane; with a parameter
// lane of its own (GPUs) the input and dz stay until the next Forward.
TEST_P(LinearTest, BackwardDropsWhatForwardKept) {
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  Rng rng(10);
  Linear fc("fc", 64, 32, rng, o);
  Allocator& allocator = GetBackend(device()).allocator();
  for (bool one_lane : {true, false}) {
    BackwardArgs args = BackwardArgs::For(device());
    args.grad_mode = GradMode::kOverwrite;
    if (one_lane) args.param_lane = args.lane;
    const int64_t before = allocator.stats().bytes_in_use;
    {
      Tensor dy = RandomInput(16, 32, 12);
      fc.Forward(RandomInput(16, 64, 11));
      BackwardJoined(fc, dy, args);
    }  // the test's x, y, dy and dx go
    const int64_t after = allocator.stats().bytes_in_use;
    if (SameQueue(args.lane, args.param_lane)) {  // on the CPU, always
      EXPECT_EQ(after, before);
    } else {
      EXPECT_GT(after, before);  // the input and dz, for the parameter lane
    }
    // A Forward allows one Backward.
    if (one_lane) {
      try {
        BackwardJoined(fc, RandomInput(16, 32, 12), args);
        ADD_FAILURE() << "a second Backward was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("each Forward allows one Backward"),
                  std::string::npos) << e.what();
      }
    }
  }
}

// Relative L2 distance between two equally long vectors.
double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    ref += double(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(ref, 1e-30));
}

std::vector<float> Rounded(std::vector<float> v) {
  for (float& x : v) x = RoundToBFloat16(x);
  return v;
}

// The dtype a bf16 layer computes in on `device`: bfloat16 where the device
// multiplies it, float32 elsewhere (Note [bf16 where the device does not
// multiply bfloat16] in layers/precision.h).
DType Bf16ComputeDType(Device device) {
  return GetBackend(device).MultipliesBFloat16() ? DType::kBFloat16 : DType::kFloat32;
}

// What a bf16 layer multiplies by for parameter `p` (0: weight, 1: bias):
// its working copy, the float32 master rounded, where the device multiplies
// bfloat16; the master itself, with no working copy, elsewhere. Checked
// against that rule.
std::vector<float> ParameterMultiplied(Linear& layer, size_t p) {
  const NamedParameter param = layer.Parameters()[p];
  EXPECT_EQ(param.value().dtype(), DType::kFloat32);
  if (Bf16ComputeDType(param.value().device()) == DType::kFloat32) {
    EXPECT_EQ(param.working(), nullptr) << "a working copy where bfloat16 is not multiplied";
    return param.value().ToVector();
  }
  EXPECT_NE(param.working(), nullptr);
  if (param.working() == nullptr) return {};
  EXPECT_EQ(param.working()->dtype(), DType::kBFloat16);
  const std::vector<float> w = param.working()->ToVector();
  EXPECT_EQ(w, Rounded(param.value().ToVector()));
  return w;
}
std::vector<float> WeightMultiplied(Linear& layer) { return ParameterMultiplied(layer, 0); }

// bf16 mode against a float32 layer whose weights and input are those the
// bf16 layer multiplies: the forward differs only by rounding its output
// once (relative 2^-8 per element); the float32 gradients come from bf16
// operands whose own rounding (dz, relative 2^-8 each) averages out over
// the batch, so 2^-6 on the whole gradient is a generous bound. Masters
// stay float32; working copies are the masters rounded.
TEST_P(LinearTest, Bf16MatchesFloat32OnBf16Values) {
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    LinearOptions o;
    o.device = device();
    o.activation = act;
    Rng rng_a(11), rng_b(11);
    o.precision = Precision::kBf16;
    Linear half("fc", 48, 24, rng_a, o);
    o.precision = Precision::kFp32;
    Linear full("fc", 48, 24, rng_b, o);
    const std::vector<float> w = WeightMultiplied(half);
    ASSERT_FALSE(w.empty());
    full.weight().CopyFrom(Tensor::FromVector(w, {24, 48}, device()));
    full.bias().CopyFrom(Tensor::FromVector(ParameterMultiplied(half, 1), {24}, device()));
    const Tensor x = Tensor::FromVector(Rounded(RandomInput(16, 48, 3).ToVector()), {16, 48},
                                        device());
    const Tensor y_half = half.Forward(x);
    const Tensor y_full = full.Forward(x);
    EXPECT_EQ(y_half.dtype(), Bf16ComputeDType(device()));
    EXPECT_LE(RelativeL2(y_half.ToVector(), y_full.ToVector()), std::pow(2.0, -8))
        << ActivationName(act);
    const Tensor dy = Tensor::FromVector(Rounded(RandomInput(16, 24, 4).ToVector()), {16, 24},
                                         device(), DType::kBFloat16);
    ZeroGrad(half);
    ZeroGrad(full);
    const Tensor dx_half = half.Backward(dy);
    Tensor dy32 = Tensor::Empty(dy.shape(), device());
    ops::Cast(dy, dy32);
    const Tensor dx_full = full.Backward(dy32);
    EXPECT_EQ(dx_half.dtype(), Bf16ComputeDType(device()));
    EXPECT_EQ(half.Parameters()[0].grad().dtype(), DType::kFloat32);
    EXPECT_LE(RelativeL2(dx_half.ToVector(), dx_full.ToVector()), std::pow(2.0, -6));
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_LE(RelativeL2(half.Parameters()[p].grad().ToVector(),
                           full.Parameters()[p].grad().ToVector()),
                std::pow(2.0, -6))
          << ActivationName(act) << " parameter " << p;
    }
  }
}

// Where the device does not multiply bfloat16, a bf16 layer computes as an
// fp32 one (Note [bf16 where the device does not multiply bfloat16] in
// layers/precision.h): from the same seed it gives the fp32 layer's bits,
// forward, backward and after an SGD step in Backward, in float32 and with
// no working copies; a bfloat16 input is widened once and then computed
// with in float32 too.
TEST_P(LinearTest, Bf16WhereNotMultipliedComputesAsFp32) {
  if (GetBackend(device()).MultipliesBFloat16()) {
    GTEST_SKIP() << device() << " multiplies bfloat16 (linear_widen_test runs this test on a "
                 << "CPU that does not)";
  }
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    LinearOptions o;
    o.device = device();
    o.activation = act;
    Rng rng_a(13), rng_b(13);
    o.precision = Precision::kBf16;
    Linear half("fc", 48, 24, rng_a, o);
    o.precision = Precision::kFp32;
    Linear full("fc", 48, 24, rng_b, o);
    for (size_t p = 0; p < 2; ++p) EXPECT_EQ(half.Parameters()[p].working(), nullptr) << p;
    const Tensor x = RandomInput(16, 48, 15), dy = RandomInput(16, 24, 16);
    const Tensor y_half = half.Forward(x);
    EXPECT_EQ(y_half.dtype(), DType::kFloat32);
    EXPECT_EQ(y_half.ToVector(), full.Forward(x).ToVector()) << ActivationName(act);
    SgdParams plain;
    plain.lr = 0.5f;
    Sgd sgd_half(half.Parameters(), plain), sgd_full(full.Parameters(), plain);
    BackwardArgs update_half = BackwardArgs::For(device()), update_full = update_half;
    update_half.update = sgd_half.in_backward();
    update_full.update = sgd_full.in_backward();
    const Tensor dx_half = BackwardJoined(half, dy, update_half);
    EXPECT_EQ(dx_half.dtype(), DType::kFloat32);
    EXPECT_EQ(dx_half.ToVector(), BackwardJoined(full, dy, update_full).ToVector())
        << ActivationName(act);
    sgd_half.Step();
    sgd_full.Step();
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(half.Parameters()[p].value().ToVector(), full.Parameters()[p].value().ToVector())
          << ActivationName(act) << " parameter " << p;
    }
    const Tensor x16 = Tensor::FromVector(x.ToVector(), x.shape(), device(), DType::kBFloat16);
    Tensor x_widened = Tensor::Empty(x.shape(), device());
    ops::Cast(x16, x_widened);
    EXPECT_EQ(half.Forward(x16).ToVector(), full.Forward(x_widened).ToVector())
        << ActivationName(act) << ", a bfloat16 input";
  }
}

// SGD inside Backward in bf16: the float32 masters move by -lr times the
// gradients, and the working copies follow them (rounded), after Step.
TEST_P(LinearTest, Bf16SgdInBackwardKeepsWorkingCopies) {
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  o.precision = Precision::kBf16;
  Rng rng_a(5), rng_b(5);
  Linear fused("fc", 8, 6, rng_a, o), reference("fc", 8, 6, rng_b, o);
  const Tensor x = RandomInput(4, 8, 6);
  const Tensor dy = Tensor::FromVector(RandomInput(4, 6, 7).ToVector(), {4, 6}, device(),
                                       DType::kBFloat16);
  SgdParams plain;
  plain.lr = 0.5f;
  Sgd sgd(fused.Parameters(), plain), reference_sgd(reference.Parameters(), plain);
  BackwardArgs update = BackwardArgs::For(device());
  update.update = sgd.in_backward();
  for (int step = 0; step < 2; ++step) {
    fused.Forward(x);
    BackwardJoined(fused, dy, update);
    sgd.Step();
    reference_sgd.ZeroGrad();
    reference.Forward(x);
    reference.Backward(dy);
    reference_sgd.Step();
  }
  for (size_t p = 0; p < 2; ++p) {
    const std::vector<float> master = fused.Parameters()[p].value().ToVector();
    const std::vector<float> expected = reference.Parameters()[p].value().ToVector();
    for (size_t i = 0; i < master.size(); ++i) {
      EXPECT_NEAR(master[i], expected[i], 1e-5f + 1e-5f * std::abs(expected[i])) << p;
    }
  }
  for (size_t p = 0; p < 2; ++p) {
    ParameterMultiplied(fused, p);
    ParameterMultiplied(reference, p);
  }
}

// MoveTo rebuilds the working copies on the new device from the masters,
// keeping them only where that device multiplies bfloat16: a layer
// built on the CPU and moved (to a GPU in the CUDA run) computes as one
// built there.
TEST_P(LinearTest, Bf16MoveToRebuildsWorkingCopies) {
  // linear_widen_test caps oneDNN below AVX-512 BF16: its CPU must widen.
  if (const char* isa = std::getenv("DNNL_MAX_CPU_ISA")) {
    EXPECT_FALSE(GetBackend(Device::Cpu()).MultipliesBFloat16()) << "DNNL_MAX_CPU_ISA=" << isa;
  }
  LinearOptions o;
  o.activation = Activation::kRelu;
  o.precision = Precision::kBf16;
  Rng rng_a(9), rng_b(9);
  Linear moved("fc", 40, 24, rng_a, o);
  o.device = device();
  Linear built_there("fc", 40, 24, rng_b, o);
  MoveTo(moved, device());
  EXPECT_EQ(moved.weight().device(), device());
  EXPECT_EQ(WeightMultiplied(moved), WeightMultiplied(built_there));
  EXPECT_EQ(ParameterMultiplied(moved, 1), ParameterMultiplied(built_there, 1));
  if (moved.Parameters()[1].working() != nullptr) {
    EXPECT_EQ(moved.Parameters()[1].working()->device(), device());
  }
  const Tensor x = RandomInput(8, 40, 10);
  EXPECT_EQ(moved.Forward(x).ToVector(), built_there.Forward(x).ToVector());
  MoveTo(moved, Device::Cpu());
  Rng rng_c(9);
  o.device = Device::Cpu();
  Linear built_on_cpu("fc", 40, 24, rng_c, o);
  EXPECT_EQ(WeightMultiplied(moved), WeightMultiplied(built_on_cpu));
  EXPECT_EQ(ParameterMultiplied(moved, 1), ParameterMultiplied(built_on_cpu, 1));
}

// TF32 against float32 from the same weights, for gradients written and
// for SGD in Backward on a parameter lane of its own: within TF32's
// rounding (10-bit mantissas). On an H200 the weight gradient is taken from
// a transposed copy of dz (Backend::GemmWantsATransposed), so a wrong
// transpose or a copy released too early shows here.
TEST_P(LinearTest, Tf32MatchesFloat32) {
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kRelu;
  const int64_t batch = 96, in = 80, out = 72;
  const Tensor x = RandomInput(batch, in, 12);
  const Tensor dy = RandomInput(batch, out, 13);
  auto make = [&](Precision precision) {
    Rng rng(14);
    o.precision = precision;
    return std::make_unique<Linear>("fc", in, out, rng, o);
  };
  auto near = [](const std::vector<float>& a, const std::vector<float>& b) {
    return RelativeL2(a, b) <= 4e-3;  // a few units of TF32's 2^-11 rounding
  };
  std::unique_ptr<Linear> tf32 = make(Precision::kTf32), full = make(Precision::kFp32);
  BackwardArgs overwrite = BackwardArgs::For(device());
  overwrite.grad_mode = GradMode::kOverwrite;
  tf32->Forward(x);
  full->Forward(x);
  EXPECT_TRUE(near(BackwardJoined(*tf32, dy, overwrite).ToVector(),
                   BackwardJoined(*full, dy, overwrite).ToVector()));
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_TRUE(near(tf32->Parameters()[p].grad().ToVector(),
                     full->Parameters()[p].grad().ToVector()))
        << "parameter " << p;
  }
  const std::vector<float> w0 = full->weight().ToVector();
  const std::vector<float> dw = full->Parameters()[0].grad().ToVector();
  SgdParams plain;
  plain.lr = 0.5f;
  Sgd sgd(tf32->Parameters(), plain);
  BackwardArgs update = BackwardArgs::For(device());
  update.update = sgd.in_backward();
  tf32->Forward(x);
  BackwardJoined(*tf32, dy, update);
  sgd.Step();
  std::vector<float> step(w0.size()), expected_step(w0.size());
  const std::vector<float> w1 = tf32->weight().ToVector();
  for (size_t i = 0; i < w0.size(); ++i) {
    step[i] = w1[i] - w0[i];
    expected_step[i] = -plain.lr * dw[i];
  }
  EXPECT_TRUE(near(step, expected_step));
}

// An N-d input [..., in] is the 2-D input [rows, in] as a view: the same
// output (as [..., out]), input gradient (as [..., in]) and parameter
// gradients, bit for bit, for the fused and the separate activations and
// for SGD folded into Backward.
TEST_P(LinearTest, NdInputEqualsReshaped2D) {
  for (Activation act : {Activation::kIdentity, Activation::kRelu, Activation::kGelu}) {
    LinearOptions o;
    o.device = device();
    o.activation = act;
    Rng rng_a(21), rng_b(21);
    Linear nd("fc", 6, 5, rng_a, o), flat("fc", 6, 5, rng_b, o);
    const Tensor x2 = RandomInput(2 * 3 * 4, 6, 22);
    const Tensor dy2 = RandomInput(2 * 3 * 4, 5, 23);
    const Tensor x = x2.Reshape({2, 3, 4, 6});
    const Tensor dy = dy2.Reshape({2, 3, 4, 5});
    const Tensor y = nd.Forward(x);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 4, 5}));
    EXPECT_EQ(y.ToVector(), flat.Forward(x2).ToVector()) << ActivationName(act);
    const Tensor dx = nd.Backward(dy);
    EXPECT_EQ(dx.shape(), x.shape());
    EXPECT_EQ(dx.ToVector(), flat.Backward(dy2).ToVector()) << ActivationName(act);
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(nd.Parameters()[p].grad().ToVector(), flat.Parameters()[p].grad().ToVector())
          << ActivationName(act) << " parameter " << p;
    }
    SgdParams plain;
    plain.lr = 0.5f;
    Sgd sgd_nd(nd.Parameters(), plain), sgd_flat(flat.Parameters(), plain);
    BackwardArgs update_nd = BackwardArgs::For(device()), update_flat = update_nd;
    update_nd.update = sgd_nd.in_backward();
    update_flat.update = sgd_flat.in_backward();
    nd.Forward(x);
    flat.Forward(x2);
    EXPECT_EQ(BackwardJoined(nd, dy, update_nd).shape(), x.shape());
    BackwardJoined(flat, dy2, update_flat);
    sgd_nd.Step();
    sgd_flat.Step();
    EXPECT_EQ(nd.weight().ToVector(), flat.weight().ToVector()) << ActivationName(act);
  }
}

TEST_P(LinearTest, NdGradients) {
  Rng rng(24);
  LinearOptions o;
  o.device = device();
  o.activation = Activation::kTanh;
  Linear fc("fc", 7, 5, rng, o);
  CompareLayerGradients(fc, RandomInput(2 * 3, 7, 25).Reshape({2, 3, 7})).Require(1e-2);
}

TEST_P(LinearTest, NdShapeErrorsNameLayerAndShapes) {
  Rng rng(0);
  LinearOptions o;
  o.device = device();
  Linear fc("fc2", 256, 128, rng, o);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string m = message([&] { fc.Forward(Tensor::Zeros({4, 16, 200}, device())); });
  EXPECT_NE(m.find("layer 'fc2' (Linear 256→128) got input [4, 16, 200]: expected [batch, "
                   "256] or [..., 256]"),
            std::string::npos)
      << m;
  fc.Forward(Tensor::Zeros({4, 16, 256}, device()));
  m = message([&] { fc.Backward(Tensor::Zeros({64, 128}, device())); });
  EXPECT_NE(m.find("layer 'fc2' (Linear 256→128) got output gradient [64, 128]: expected "
                   "[4, 16, 128]"),
            std::string::npos)
      << m;
}

TEST_P(LinearTest, ShapeErrorNamesLayerAndShapes) {
  Rng rng(0);
  LinearOptions o;
  o.device = device();
  Linear fc("fc2", 256, 128, rng, o);
  try {
    fc.Forward(Tensor::Zeros({64, 200}, device()));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "layer 'fc2' (Linear 256→128) got input [64, 200]: expected [batch, 256]"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(LinearTest, SameSeedSameWeights) {
  Rng a(42), b(42);
  LinearOptions o;
  o.device = device();
  Linear fa("fc", 10, 10, a, o), fb("fc", 10, 10, b, o);
  EXPECT_EQ(fa.weight().ToVector(), fb.weight().ToVector());
}

TEST(LinearInitTest, InitScales) {
  for (Init init : {Init::kKaimingUniform, Init::kKaimingNormal,
                    Init::kXavierUniform, Init::kXavierNormal}) {
    Rng rng(5);
    LinearOptions o;
    o.init = init;
    Linear fc("fc", 400, 100, rng, o);
    double sum_sq = 0;
    for (float w : fc.weight().ToVector()) sum_sq += double(w) * w;
    const double var = sum_sq / (400 * 100);
    const bool kaiming = init == Init::kKaimingUniform || init == Init::kKaimingNormal;
    const double expected = kaiming ? 2.0 / 400 : 2.0 / 500;
    EXPECT_NEAR(var, expected, 0.05 * expected);
  }
  EXPECT_THROW(ParseInit("he"), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(LinearTest);

}  // namespace
}  // namespace tandem
