// Every op with hand-computed values, one body for CPU and CUDA, in float32
// and, where the dtype matters to the op, bfloat16. Every op's bfloat16
// operands against its float32 result: ops_bf16_test.cc; CUDA-vs-CPU parity
// on random data: ops_parity_test.cc.
#include "core/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/rng.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class OpsTest : public DeviceTest {
 protected:
  Tensor T(const std::vector<float>& v, const Shape& s) {
    return Tensor::FromVector(v, s, device());
  }
};

// float32 tolerance for results of a few operations on small integers.
constexpr float kTol = 1e-5f;

// `fn` throws tandem::Error whose text contains `text`.
template <typename Fn>
void ExpectError(Fn fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

void ExpectNear(const std::vector<float>& actual,
                const std::vector<float>& expected, float tol = kTol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
  }
}

TEST_P(OpsTest, GemmAllTransposes) {
  // A = [[1,2,3],[4,5,6]] (2x3), B = [[1,0],[0,1],[1,1]] (3x2)
  // A B = [[4,5],[10,11]]
  Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor at = T({1, 4, 2, 5, 3, 6}, {3, 2});
  Tensor b = T({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor bt = T({1, 0, 1, 0, 1, 1}, {2, 3});
  const std::vector<float> ab = {4, 5, 10, 11};
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    Tensor c = Tensor::Full({2, 2}, NAN, device());  // beta = 0 must overwrite
    ops::Gemm(ta ? at : a, ta, tb ? bt : b, tb, c);
    ExpectNear(c.ToVector(), ab);
  }
  // alpha and beta: c = 2 * A B + 0.5 * c
  Tensor c = T({2, 2, 2, 2}, {2, 2});
  ops::Gemm(a, false, b, false, c, 2.f, 0.5f);
  ExpectNear(c.ToVector(), {9, 11, 21, 23});
}

// d = act(alpha a b + beta c + bias) with c a separate buffer (cuBLASLt on a
// GPU, a copy + GEMM + bias pass on the CPU).
TEST_P(OpsTest, GemmWithSeparateOutputBiasAndRelu) {
  Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = T({1, 0, 0, 1, 1, 1}, {3, 2});  // a b = [[4, 5], [10, 11]]
  Tensor c = T({1, 2, 3, 4}, {2, 2});
  Tensor d = Tensor::Full({2, 2}, NAN, device());
  ops::GemmOptions o;
  o.alpha = -1.f;
  o.beta = 2.f;
  o.c = &c;
  ops::Gemm(a, false, b, false, d, o);  // -ab + 2c
  ExpectNear(d.ToVector(), {-2, -1, -4, -3});
  ExpectNear(c.ToVector(), {1, 2, 3, 4});  // c is only read
  Tensor bias = T({3, -20}, {2});
  ops::GemmOptions relu;
  relu.bias = &bias;
  relu.activation = Activation::kRelu;
  Tensor bt = T({1, 0, 1, 0, 1, 1}, {2, 3});
  ops::Gemm(a, false, bt, true, d, relu);  // relu(a b + bias)
  ExpectNear(d.ToVector(), {7, 0, 13, 0});
  ops::GemmOptions identity;
  identity.bias = &bias;
  ops::Gemm(a, false, b, false, d, identity);
  ExpectNear(d.ToVector(), {7, -15, 13, -9});
  // Larger, transposed operands, against the plain GEMM + bias pass.
  Rng rng(5);
  std::vector<float> xv(64 * 96), wv(48 * 96), bv(48);
  for (float& v : xv) v = rng.Normal();
  for (float& v : wv) v = rng.Normal();
  for (float& v : bv) v = rng.Normal();
  Tensor x = T(xv, {64, 96}), w = T(wv, {48, 96}), bb = T(bv, {48});
  Tensor fused = Tensor::Empty({64, 48}, device()), plain = Tensor::Empty({64, 48}, device());
  ops::GemmOptions both;
  both.bias = &bb;
  both.activation = Activation::kRelu;
  ops::Gemm(x, false, w, true, fused, both);
  ops::Gemm(x, false, w, true, plain);
  ops::BiasActivation(Activation::kRelu, plain, bb, nullptr, plain);
  ExpectNear(fused.ToVector(), plain.ToVector(), 1e-4f);
  Tensor wrong = Tensor::Zeros({3}, device());
  ops::GemmOptions bad;
  bad.bias = &wrong;
  EXPECT_THROW(ops::Gemm(x, false, w, true, fused, bad), Error);
}

TEST_P(OpsTest, GemmShapeErrorNamesShapes) {
  Tensor a = Tensor::Zeros({64, 200}, device());
  Tensor b = Tensor::Zeros({256, 128}, device());
  Tensor c = Tensor::Zeros({64, 128}, device());
  try {
    ops::Gemm(a, false, b, false, c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "Gemm: op(a) is [64, 200] but op(b) is [256, 128]"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(OpsTest, BiasActivationAndColumnSums) {
  Tensor x = T({-1, 2, 3, -4}, {2, 2});
  Tensor bias = T({0.5f, -1}, {2});
  Tensor pre = Tensor::Empty({2, 2}, device());
  Tensor out = Tensor::Empty({2, 2}, device());
  ops::BiasActivation(Activation::kRelu, x, bias, &pre, out);
  ExpectNear(pre.ToVector(), {-0.5f, 1, 3.5f, -5});
  ExpectNear(out.ToVector(), {0, 1, 3.5f, 0});
  ops::AddBias(x, bias);
  ExpectNear(x.ToVector(), {-0.5f, 1, 3.5f, -5});

  Tensor sums = T({10, 20}, {2});
  ops::ColumnSums(pre, sums, 1.f);
  ExpectNear(sums.ToVector(), {13, 16});
  ops::ColumnSums(pre, sums);
  ExpectNear(sums.ToVector(), {3, -4});
  ops::ColumnSums(pre, sums, 1.f, -0.5f);  // sums -= 0.5 * column sums
  ExpectNear(sums.ToVector(), {1.5f, -2});
  EXPECT_THROW(ops::ColumnSums(pre, bias = Tensor::Zeros({3}, device())), Error);
}

TEST_P(OpsTest, ElementwiseOps) {
  Tensor a = T({1, 2, 3}, {3});
  Tensor b = T({4, 5, 6}, {3});
  Tensor out = Tensor::Empty({3}, device());
  ops::Add(a, b, out);
  ExpectNear(out.ToVector(), {5, 7, 9});
  ops::Sub(a, b, out);
  ExpectNear(out.ToVector(), {-3, -3, -3});
  ops::Mul(a, b, out);
  ExpectNear(out.ToVector(), {4, 10, 18});
  ops::Axpy(2.f, a, b);
  ExpectNear(b.ToVector(), {6, 9, 12});
  ops::Scale(b, 0.5f);
  ExpectNear(b.ToVector(), {3, 4.5f, 6});
  ops::Fill(b, -1.f);
  ExpectNear(b.ToVector(), {-1, -1, -1});
  EXPECT_THROW(ops::Add(a, Tensor::Zeros({4}, device()), out), Error);
}

TEST_P(OpsTest, ActivationValuesAndDerivatives) {
  Tensor x = T({-1, 0.5f, 1}, {3});
  Tensor y = Tensor::Empty({3}, device());
  Tensor dy = T({1, 1, 2}, {3});
  Tensor dx = Tensor::Empty({3}, device());

  ops::ActivationForward(Activation::kRelu, x, y);
  ExpectNear(y.ToVector(), {0, 0.5f, 1});
  ops::ActivationBackward(Activation::kRelu, x, dy, dx);
  ExpectNear(dx.ToVector(), {0, 1, 2});

  // tanh(0.5) = 0.46211716, tanh'(x) = 1 - tanh(x)^2
  ops::ActivationForward(Activation::kTanh, x, y);
  ExpectNear(y.ToVector(), {-0.76159416f, 0.46211716f, 0.76159416f});
  ops::ActivationBackward(Activation::kTanh, x, dy, dx);
  ExpectNear(dx.ToVector(), {0.41997434f, 0.78644773f, 2 * 0.41997434f});

  // GELU(x) = x Phi(x): Phi(1) = 0.84134475, Phi(0.5) = 0.69146246;
  // GELU'(x) = Phi(x) + x phi(x): phi(1) = 0.24197072, phi(0.5) = 0.35206533
  ops::ActivationForward(Activation::kGelu, x, y);
  ExpectNear(y.ToVector(), {-1 * (1 - 0.84134475f), 0.5f * 0.69146246f, 0.84134475f});
  ops::ActivationBackward(Activation::kGelu, x, dy, dx);
  ExpectNear(dx.ToVector(), {(1 - 0.84134475f) - 0.24197072f,
                             0.69146246f + 0.5f * 0.35206533f,
                             2 * (0.84134475f + 0.24197072f)});
  // accumulate adds instead of overwriting
  ops::ActivationBackward(Activation::kRelu, x, dy, dx, /*accumulate=*/true);
  EXPECT_NEAR(dx.ToVector()[2], 2 * (0.84134475f + 0.24197072f) + 2, kTol);
}

TEST_P(OpsTest, SoftmaxCrossEntropyHandValues) {
  // Row 0: logits [1, 2, 3], label 2: loss = log(e + e^2 + e^3) - 3 = 0.40760596
  // Row 1: logits [0, 0, 0], label 0: loss = log 3 = 1.0986123
  Tensor logits = T({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor labels = T({2, 0}, {2});
  Tensor loss = Tensor::Empty({1}, device());
  Tensor grad = Tensor::Empty({2, 3}, device());
  ops::SoftmaxCrossEntropy(logits, labels, loss, &grad);
  EXPECT_NEAR(loss.Item(), (0.40760596f + 1.0986123f) / 2, kTol);
  // softmax([1,2,3]) = [0.09003057, 0.24472847, 0.66524096]
  ExpectNear(grad.ToVector(),
             {0.09003057f / 2, 0.24472847f / 2, (0.66524096f - 1) / 2,
              (1.f / 3 - 1) / 2, 1.f / 6, 1.f / 6});
  // A custom normalizer (the global batch in data parallelism).
  ops::SoftmaxCrossEntropy(logits, labels, loss, nullptr, 4.f);
  EXPECT_NEAR(loss.Item(), (0.40760596f + 1.0986123f) / 4, kTol);
  // Large logits stay finite (max subtraction).
  Tensor big = T({1000, 0}, {1, 2});
  Tensor one = T({1}, {1});
  ops::SoftmaxCrossEntropy(big, one, loss, nullptr);
  EXPECT_NEAR(loss.Item(), 1000.f, 1e-2f);
}

TEST_P(OpsTest, MseHandValues) {
  Tensor pred = T({1, 2, 3, 4}, {2, 2});
  Tensor target = T({1, 0, 3, 1}, {2, 2});
  Tensor loss = Tensor::Empty({1}, device());
  Tensor grad = Tensor::Empty({2, 2}, device());
  ops::Mse(pred, target, loss, &grad);
  EXPECT_NEAR(loss.Item(), (0 + 4 + 0 + 9) / 4.f, kTol);
  ExpectNear(grad.ToVector(), {0, 2 * 2 / 4.f, 0, 2 * 3 / 4.f});
  EXPECT_THROW(ops::Mse(pred, Tensor::Zeros({4}, device()), loss, nullptr), Error);
}

TEST_P(OpsTest, SumOfSquaresHandValues) {
  Tensor out = Tensor::Full({1}, NAN, device());  // overwritten, not added to
  ops::SumOfSquares(T({1, -2, 3, 0.5f}, {2, 2}), out);
  EXPECT_NEAR(out.Item(), 1 + 4 + 9 + 0.25f, kTol);
  // bfloat16 holds these exactly; the sum is float32.
  ops::SumOfSquares(Tensor::FromVector({3, -4}, {2}, device(), DType::kBFloat16), out);
  EXPECT_EQ(out.Item(), 25.f);
  // A long sum, in double: 1e6 ones squared is exact.
  ops::SumOfSquares(Tensor::Full({1000000}, -1.f, device()), out);
  EXPECT_EQ(out.Item(), 1e6f);
  ops::SumOfSquares(Tensor::Zeros({0}, device()), out);
  EXPECT_EQ(out.Item(), 0.f);
  Tensor two = Tensor::Empty({2}, device());
  ExpectError([&] { ops::SumOfSquares(T({1, 2}, {2}), two); },
              "SumOfSquares: output must have one element");
}

TEST_P(OpsTest, ArgmaxAndCountCorrect) {
  Tensor logits = T({0.1f, 0.9f, 0.0f, 3, 1, 2, 5, 5, 1}, {3, 3});
  Tensor idx = Tensor::Empty({3}, device());
  ops::Argmax(logits, idx);
  ExpectNear(idx.ToVector(), {1, 0, 0});  // ties pick the first
  Tensor labels = T({1, 2, 0}, {3});
  Tensor correct = Tensor::Empty({1}, device());
  ops::CountCorrect(logits, labels, correct);
  EXPECT_EQ(correct.Item(), 2.f);
}

TEST_P(OpsTest, DropoutMaskRateScaleAndDeterminism) {
  const int64_t n = 100000;
  Tensor mask = Tensor::Empty({n}, device());
  ops::DropoutMask(0.25f, 42, 0, mask);
  const std::vector<float> m = mask.ToVector();
  int64_t zeros = 0;
  for (float v : m) {
    if (v == 0.f) ++zeros;
    else EXPECT_FLOAT_EQ(v, 1.f / 0.75f);
  }
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.25, 0.01);
  // Same seed and offset: same mask; an offset continues the stream.
  Tensor again = Tensor::Empty({n - 10}, device());
  ops::DropoutMask(0.25f, 42, 10, again);
  const std::vector<float> tail = again.ToVector();
  for (int64_t i = 0; i < n - 10; ++i) ASSERT_EQ(tail[i], m[i + 10]);
  EXPECT_THROW(ops::DropoutMask(1.f, 1, 0, mask), Error);
}

TEST_P(OpsTest, SgdUpdateMatchesHandMath) {
  // g' = g + wd p = 1 + 0.1*2 = 1.2; v = 0.9*0.5 + 1.2 = 1.65
  // plain: p = 2 - 0.1*1.65 = 1.835; nesterov: g'' = 1.2 + 0.9*1.65 = 2.685,
  // p = 2 - 0.2685 = 1.7315
  SgdParams s;
  s.lr = 0.1f;
  s.momentum = 0.9f;
  s.weight_decay = 0.1f;
  Tensor p = T({2}, {1}), g = T({1}, {1}), v = T({0.5f}, {1});
  ops::SgdUpdate(s, p, g, &v);
  EXPECT_NEAR(p.Item(), 1.835f, kTol);
  EXPECT_NEAR(v.Item(), 1.65f, kTol);
  s.nesterov = true;
  p = T({2}, {1});
  v = T({0.5f}, {1});
  ops::SgdUpdate(s, p, g, &v);
  EXPECT_NEAR(p.Item(), 1.7315f, kTol);
  EXPECT_THROW(ops::SgdUpdate(s, p, g, nullptr), Error);
}

TEST_P(OpsTest, AdamWUpdateMatchesHandMath) {
  // step 1, p = 1, g = 0.5, lr 0.1, wd 0.01:
  // p <- 1 - 0.1*0.01*1 = 0.999; m = 0.05, v = 0.00025;
  // m_hat = 0.5, v_hat = 0.25; p <- 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899
  AdamWParams a;
  a.lr = 0.1f;
  a.weight_decay = 0.01f;
  Tensor p = T({1}, {1}), g = T({0.5f}, {1});
  Tensor m = Tensor::Zeros({1}, device()), v = Tensor::Zeros({1}, device());
  ops::AdamWUpdate(a, 1, p, g, m, v);
  EXPECT_NEAR(p.Item(), 0.899f, kTol);
  EXPECT_NEAR(m.Item(), 0.05f, kTol);
  EXPECT_NEAR(v.Item(), 0.00025f, 1e-8f);
  EXPECT_THROW(ops::AdamWUpdate(a, 0, p, g, m, v), Error);
}

TEST_P(OpsTest, TrackNonFiniteRecordsTheFirstBadStep) {
  Tensor first_bad = T({-1}, {1});
  ops::TrackNonFinite(T({0.5f}, {1}), 3, first_bad);
  EXPECT_EQ(first_bad.Item(), -1.f);
  ops::TrackNonFinite(T({NAN}, {1}), 7, first_bad);
  ops::TrackNonFinite(T({INFINITY}, {1}), 9, first_bad);
  EXPECT_EQ(first_bad.Item(), 7.f);
}

TEST_P(OpsTest, ZeroSizedOperandsAreNoOps) {
  Tensor e = Tensor::Zeros({0, 3}, device());
  Tensor w = Tensor::Zeros({3, 2}, device());
  Tensor out = Tensor::Zeros({0, 2}, device());
  ops::Gemm(e, false, w, false, out);
  Tensor loss = Tensor::Full({1}, 9.f, device());
  Tensor labels = Tensor::Zeros({0}, device());
  ops::SoftmaxCrossEntropy(e, labels, loss, nullptr);
  EXPECT_EQ(loss.Item(), 0.f);
}

// Work on the side lane starts after what the main lane queued before the
// WaitFor, and the main lane sees it after WaitFor the other way. Sizes are
// large enough (2^24 elements, GEMMs of 1024^3) that a missing wait on a GPU
// reads stale values rather than finishing first by luck.
TEST_P(OpsTest, LanesAreOrderedByWaitFor) {
  Backend& backend = GetBackend(device());
  const Lane main = backend.main_lane();
  const Lane side = backend.side_lane();
  const int64_t n = int64_t{1} << 24;
  Tensor x = Tensor::Empty({n}, device());
  Tensor y = Tensor::Empty({n}, device());
  Tensor a = Tensor::Full({1024, 1024}, 1.f / 1024, device());
  Tensor c = Tensor::Empty({1024, 1024}, device());
  for (int round = 0; round < 3; ++round) {
    ops::Fill(main, x, static_cast<float>(round + 1));
    ops::Fill(main, y, 0.f);
    ops::WaitFor(side, main);
    ops::Axpy(side, 2.f, x, y);                      // y = 2 (round + 1)
    ops::Gemm(side, a, false, a, false, c, 1.f, 0.f);  // c = 1/1024 everywhere
    ops::WaitFor(main, side);
    ops::Scale(main, y, 0.5f);  // y = round + 1
    const std::vector<float> got = y.ToVector();
    EXPECT_EQ(got.front(), round + 1.f) << "round " << round;
    EXPECT_EQ(got.back(), round + 1.f) << "round " << round;
  }
  EXPECT_NEAR(c.ToVector().back(), 1.f / 1024, 1e-7f);
}

// A lane of one's own (NewLane) orders the same way, and an event recorded
// there orders a wait on it; the host waits for it with Synchronize.
TEST_P(OpsTest, OwnedLanesAndEventsOrderWork) {
  Backend& backend = GetBackend(device());
  OwnedLane mine = backend.NewLane({"test", /*high_priority=*/true});
  const Lane main = backend.main_lane();
  const int64_t n = int64_t{1} << 24;
  Tensor x = Tensor::Full({n}, 1.f, device());
  ops::WaitFor(mine.get(), main);
  ops::Scale(mine.get(), x, 3.f);
  std::unique_ptr<LaneEvent> done = backend.NewEvent(/*timing=*/false);
  backend.Record(*done, mine.get());
  backend.Wait(main, *done);
  ops::Axpy(main, 1.f, x, x);  // 6, only if the scale came first
  EXPECT_EQ(x.ToVector().back(), 6.f);
  done->Synchronize();
  EXPECT_TRUE(done->Query());
}

TEST_P(OpsTest, TimingEventsMeasureALane) {
  Backend& backend = GetBackend(device());
  const Lane main = backend.main_lane();
  auto start = backend.NewEvent(/*timing=*/true);
  auto stop = backend.NewEvent(/*timing=*/true);
  Tensor a = Tensor::Full({512, 512}, 1.f, device());
  Tensor c = Tensor::Empty({512, 512}, device());
  backend.Record(*start, main);
  ops::Gemm(main, a, false, a, false, c);
  backend.Record(*stop, main);
  EXPECT_GE(stop->ElapsedMsSince(*start), 0.0);
}

TEST_P(OpsTest, OpsRefuseALaneOfAnotherDevice) {
  Tensor x = Tensor::Zeros({4}, device());
  const Lane elsewhere = device().is_cpu() && CudaDeviceCount() > 0
                             ? GetBackend(Device::Cuda(0)).main_lane()
                             : GetBackend(Device::Cpu()).main_lane();
  if (elsewhere.device() == device()) GTEST_SKIP() << "needs a second device kind";
  EXPECT_THROW(ops::Fill(elsewhere, x, 1.f), Error);
  EXPECT_THROW(ops::Fill(Lane(), x, 1.f), Error);
}

// Scratch memory is reused in the main lane's order, so the ops that take
// it refuse other lanes on a GPU (every CPU lane is the calling thread).
TEST_P(OpsTest, OpsThatNeedScratchMemoryRunOnTheMainLaneOnly) {
  Tensor pred = Tensor::Zeros({4}, device());
  Tensor loss = Tensor::Empty({1}, device());
  const Lane side = GetBackend(device()).side_lane();
  if (device().is_cpu()) {
    EXPECT_NO_THROW(ops::Mse(side, pred, pred, loss, nullptr));
    EXPECT_NO_THROW(ops::SumOfSquares(side, pred, loss));
  } else {
    EXPECT_THROW(ops::Mse(side, pred, pred, loss, nullptr), Error);
    ExpectError([&] { ops::SumOfSquares(side, pred, loss); }, "SumOfSquares on cuda:0");
  }
}

// A GEMM reserve plans GEMMs for fewer SMs: same results; a reserve that
// leaves no SM, or a negative one, is refused naming the lane.
TEST_P(OpsTest, GemmReserveKeepsResultsAndRejectsBadReserves) {
  Backend& backend = GetBackend(device());
  // Small integers: every partial sum is exact, so any summation order a
  // differently planned GEMM picks gives the same bits.
  std::vector<float> values(256 * 256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.f;
  Tensor a = Tensor::FromVector(values, {256, 256}, device());
  Tensor plain = Tensor::Empty({256, 256}, device());
  Tensor reserved = Tensor::Empty({256, 256}, device());
  ops::Gemm(backend.main_lane(), a, false, a, true, plain);
  ops::Gemm(backend.main_lane().WithGemmReserve(8), a, false, a, true, reserved);
  EXPECT_EQ(plain.ToVector(), reserved.ToVector());
  ops::Gemm(backend.main_lane().WithGemmReserve(8), a, false, a, true, reserved,
            ops::GemmOptions{});  // the cuBLASLt path on a GPU
  EXPECT_EQ(plain.ToVector(), reserved.ToVector());
  EXPECT_THROW(backend.main_lane().WithGemmReserve(-1), Error);
  if (device().is_cuda()) {
    EXPECT_THROW(backend.main_lane().WithGemmReserve(1 << 20), Error);
  }
}

// ---- bfloat16 ----

// Small integers and halves are exact in bfloat16 and every partial sum
// here is too, so a bfloat16 GEMM gives exact values however it sums.
TEST_P(OpsTest, GemmInBFloat16) {
  const DType bf = DType::kBFloat16;
  Tensor a = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3}, device(), bf);
  Tensor at = Tensor::FromVector({1, 4, 2, 5, 3, 6}, {3, 2}, device(), bf);
  Tensor b = Tensor::FromVector({1, 0, 0, 1, 1, 1}, {3, 2}, device(), bf);
  Tensor bt = Tensor::FromVector({1, 0, 1, 0, 1, 1}, {2, 3}, device(), bf);
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    Tensor c = Tensor::Full({2, 2}, NAN, device(), bf);  // beta = 0 must overwrite
    ops::Gemm(ta ? at : a, ta, tb ? bt : b, tb, c);
    EXPECT_EQ(c.ToVector(), (std::vector<float>{4, 5, 10, 11})) << "mode " << mode;
    Tensor wide = Tensor::Full({2, 2}, NAN, device());  // bfloat16 in, float32 out
    ops::Gemm(ta ? at : a, ta, tb ? bt : b, tb, wide);
    EXPECT_EQ(wide.ToVector(), (std::vector<float>{4, 5, 10, 11})) << "mode " << mode;
  }
  // In place with beta, then a separate c with a bias and ReLU.
  Tensor c = Tensor::FromVector({2, 2, 2, 2}, {2, 2}, device(), bf);
  ops::Gemm(a, false, b, false, c, 2.f, 0.5f);
  EXPECT_EQ(c.ToVector(), (std::vector<float>{9, 11, 21, 23}));
  Tensor bias = Tensor::FromVector({3, -60}, {2}, device(), bf);
  Tensor d = Tensor::Full({2, 2}, NAN, device(), bf);
  ops::GemmOptions o;
  o.beta = 1.f;
  o.c = &c;
  o.bias = &bias;
  o.activation = Activation::kRelu;
  ops::Gemm(a, false, bt, true, d, o);  // relu(a b + c + bias)
  EXPECT_EQ(d.ToVector(), (std::vector<float>{16, 0, 34, 0}));
  // GELU(x) is x for x >= 16 and -0 for x <= -20 in float32 (erf is +-1
  // there); the GPU rounds the product before its GELU pass, exact here.
  o.activation = Activation::kGelu;
  ops::Gemm(a, false, bt, true, d, o);
  EXPECT_EQ(d.ToVector(), (std::vector<float>{16, -0.f, 34, -0.f}));
}

// k = 0: an empty sum, d = beta c (+ bias, activation), in both dtypes.
TEST_P(OpsTest, GemmWithNoInnerDimension) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    Tensor a = Tensor::Zeros({2, 0}, device(), dtype);
    Tensor b = Tensor::Zeros({0, 3}, device(), dtype);
    Tensor c = Tensor::FromVector({1, -2, 3, -4, 5, -6}, {2, 3}, device(), dtype);
    Tensor d = Tensor::Full({2, 3}, NAN, device(), dtype);
    Tensor bias = Tensor::FromVector({0.5f, 0.5f, -10}, {3}, device(), dtype);
    ops::GemmOptions o;
    o.beta = 0.5f;
    o.c = &c;
    ops::Gemm(a, false, b, false, d, o);
    EXPECT_EQ(d.ToVector(), (std::vector<float>{0.5f, -1, 1.5f, -2, 2.5f, -3}))
        << DTypeName(dtype);
    o.bias = &bias;
    o.activation = Activation::kRelu;
    ops::Gemm(a, false, b, false, d, o);
    EXPECT_EQ(d.ToVector(), (std::vector<float>{1, 0, 0, 0, 3, 0})) << DTypeName(dtype);
    ops::Gemm(a, false, b, false, c);  // beta 0 in place: zeros
    EXPECT_EQ(c.ToVector(), std::vector<float>(6, 0.f)) << DTypeName(dtype);
  }
}

// Each dtype error names the op, the operands, their dtypes and shapes.
TEST_P(OpsTest, DTypeErrorsNameTheOpAndTheDTypes) {
  const DType bf = DType::kBFloat16;
  Tensor h = Tensor::Zeros({3}, device(), bf);
  Tensor f = Tensor::Zeros({3}, device());
  ExpectError([&] { ops::Add(h, f, h); },
              "Add: a is bfloat16 [3] but b is float32 [3]: they must share a dtype");
  ExpectError([&] { ops::ActivationBackward(Activation::kRelu, f, h, f); },
              "ActivationBackward: dy is bfloat16 [3] but dx is float32 [3]");
  ExpectError([&] { ops::SgdUpdate(SgdParams{}, h, f, nullptr); },
              "SgdUpdate: the parameter is bfloat16 [3], expected float32");
  Tensor m = Tensor::Zeros({3}, device(), bf), v = Tensor::Zeros({3}, device());
  ExpectError([&] { ops::AdamWUpdate(AdamWParams{}, 1, f, h, m, v); },
              "AdamWUpdate: the optimizer state is bfloat16 [3], expected float32");
  Tensor logits = Tensor::Zeros({2, 3}, device(), bf);
  Tensor loss = Tensor::Zeros({1}, device());
  ExpectError([&] { ops::SoftmaxCrossEntropy(logits, Tensor::Zeros({2}, device(), bf), loss, nullptr); },
              "SoftmaxCrossEntropy: labels is bfloat16 [2], expected float32");
  Tensor x = Tensor::Zeros({2, 3}, device()), w = Tensor::Zeros({4, 3}, device());
  Tensor y = Tensor::Zeros({2, 4}, device(), bf);
  ExpectError([&] { ops::Gemm(x, false, w, true, y); },
              "Gemm: float32 a and b give a float32 result, but d is bfloat16");
  ExpectError([&] { ops::Gemm(logits, false, w, true, y); },
              "Gemm: a is bfloat16 [2, 3] but b is float32 [4, 3]: they must share a dtype");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(OpsTest);

}  // namespace
}  // namespace tandem
