// bfloat16 operands give what the float32 op gives, for every op but the
// GEMM (hand values in ops_test.cc, parity in ops_parity_test.cc) and in
// every dtype combination core/ops.cc accepts; one test body for CPU and
// CUDA.
//
// Tolerances. Inputs are bfloat16-representable, so the bfloat16 op and the
// float32 op see the same numbers and, computing in float32, the same
// float32 results; a bfloat16 output then differs from the float32 one only
// by its one rounding to nearest even: at most half a unit in the last
// place, |a - e| <= 2^-8 |e| (checked with a float32 slack of 1e-6 |e|).
// Float32 outputs computed from bfloat16 inputs (losses, float32 sums, the
// updated float32 parameter) are the float32 op's, to float32 rounding
// (relative 1e-6). Reductions sum in float32 (the losses in double) in
// either dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

constexpr double kF32Rel = 1e-6;
// One rounding, 2^-8, plus kF32Rel for float32 arithmetic that a compiler
// may order differently between two instantiations of a GPU kernel.
constexpr double kBf16Rel = 1.0 / 256 + kF32Rel;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kBf16 = DType::kBFloat16;

// One operand of a checked op: its values (rounded to bfloat16 first, so
// both runs see the same numbers), its shape and its dtype in the mixed run.
struct Operand {
  std::vector<float> values;
  Shape shape;
  DType dtype;
};

using testing::DeviceTest;
class OpsBf16Test : public DeviceTest {
 protected:
  // n bfloat16-representable values, normal with the given scale.
  std::vector<float> Values(int64_t n, float scale = 1.f) {
    std::vector<float> v(n);
    for (float& x : v) x = RoundToBFloat16(rng_.Normal(0.f, scale));
    return v;
  }

  // The operand on the device; with `offset`, a view one element into a
  // larger buffer, so no pointer is 16-byte aligned and the GPU takes its
  // scalar paths (without it, its vector paths and their tails).
  Tensor Make(const Operand& o, DType dtype, bool offset) {
    std::vector<float> v = o.values;
    for (float& x : v) x = RoundToBFloat16(x);
    if (!offset) return Tensor::FromVector(v, o.shape, device(), dtype);
    v.insert(v.begin(), 0.f);
    Tensor buffer = Tensor::FromVector(v, {static_cast<int64_t>(v.size())}, device(), dtype);
    return buffer.Slice(1, buffer.numel()).Reshape(o.shape);
  }

  // Runs `op` on float32 operands and on operands of the given dtypes, with
  // aligned and with offset buffers, and checks every operand afterwards
  // against the float32 run (see the tolerances above).
  void Check(const std::string& what, const std::vector<Operand>& operands,
             const std::function<void(std::vector<Tensor>&)>& op) {
    for (bool offset : {false, true}) {
      std::vector<Tensor> f32, mixed;
      for (const Operand& o : operands) {
        f32.push_back(Make(o, kF32, offset));
        mixed.push_back(Make(o, o.dtype, offset));
      }
      op(f32);
      op(mixed);
      for (size_t t = 0; t < operands.size(); ++t) {
        ASSERT_EQ(mixed[t].dtype(), operands[t].dtype) << what;
        const std::vector<float> expected = f32[t].ToVector();
        const std::vector<float> actual = mixed[t].ToVector();
        const double rel = operands[t].dtype == kBf16 ? kBf16Rel : kF32Rel;
        for (size_t i = 0; i < expected.size(); ++i) {
          ASSERT_LE(std::fabs(double(actual[i]) - expected[i]), rel * std::fabs(expected[i]))
              << what << (offset ? " (offset)" : "") << ": operand " << t << " element " << i
              << " is " << actual[i] << ", float32 gives " << expected[i];
        }
      }
    }
  }

  Rng rng_{99};
};

// Sizes that are not a multiple of the GPU's 8-element vectors.
constexpr int64_t kRows = 37, kCols = 29, kN = kRows * kCols;

TEST_P(OpsBf16Test, FillScaleAndCast) {
  Check("fill", {{Values(kN), {kN}, kBf16}},
        [](std::vector<Tensor>& t) { ops::Fill(t[0], 0.1f); });
  Check("scale", {{Values(kN), {kN}, kBf16}},
        [](std::vector<Tensor>& t) { ops::Scale(t[0], 0.3f); });
  // Casts of bfloat16 values are exact; float32 -> bfloat16 of arbitrary
  // floats rounds once (checked bit by bit in dtype_test.cc).
  for (DType from : {kF32, kBf16}) {
    for (DType to : {kF32, kBf16}) {
      Check(std::string("cast ") + DTypeName(from) + " -> " + DTypeName(to),
            {{Values(kN), {kN}, from}, {Values(kN), {kN}, to}},
            [](std::vector<Tensor>& t) { ops::Cast(t[0], t[1]); });
    }
  }
}

TEST_P(OpsBf16Test, BinaryAndAxpy) {
  const auto all = [&](DType d) {
    return std::vector<Operand>{{Values(kN), {kN}, d}, {Values(kN), {kN}, d},
                                {Values(kN), {kN}, d}};
  };
  Check("add", all(kBf16), [](std::vector<Tensor>& t) { ops::Add(t[0], t[1], t[2]); });
  Check("sub", all(kBf16), [](std::vector<Tensor>& t) { ops::Sub(t[0], t[1], t[2]); });
  Check("mul", all(kBf16), [](std::vector<Tensor>& t) { ops::Mul(t[0], t[1], t[2]); });
  Check("mul in place", all(kBf16), [](std::vector<Tensor>& t) { ops::Mul(t[0], t[1], t[0]); });
  for (DType x : {kF32, kBf16}) {
    for (DType y : {kF32, kBf16}) {
      Check(std::string("axpy x ") + DTypeName(x) + " y " + DTypeName(y),
            {{Values(kN), {kN}, x}, {Values(kN), {kN}, y}},
            [](std::vector<Tensor>& t) { ops::Axpy(-0.75f, t[0], t[1]); });
    }
  }
}

TEST_P(OpsBf16Test, ActivationsAndBias) {
  for (Activation act : kActivations) {
    const std::string name = ActivationName(act);
    Check("bias_activation " + name,
          {{Values(kN, 2.f), {kRows, kCols}, kBf16}, {Values(kCols), {kCols}, kBf16},
           {Values(kN), {kRows, kCols}, kBf16}, {Values(kN), {kRows, kCols}, kBf16}},
          [&](std::vector<Tensor>& t) { ops::BiasActivation(act, t[0], t[1], &t[2], t[3]); });
    Check("activation_forward " + name,
          {{Values(kN, 2.f), {kN}, kBf16}, {Values(kN), {kN}, kBf16}},
          [&](std::vector<Tensor>& t) { ops::ActivationForward(act, t[0], t[1]); });
    for (DType x : {kF32, kBf16}) {
      for (DType g : {kF32, kBf16}) {
        for (bool accumulate : {false, true}) {
          Check("activation_backward " + name + " x " + DTypeName(x) + " dy/dx " +
                    DTypeName(g) + (accumulate ? " accumulate" : ""),
                {{Values(kN, 2.f), {kN}, x}, {Values(kN), {kN}, g}, {Values(kN), {kN}, g}},
                [&](std::vector<Tensor>& t) {
                  ops::ActivationBackward(act, t[0], t[1], t[2], accumulate);
                });
        }
      }
    }
  }
  Check("add_bias in place", {{Values(kN), {kRows, kCols}, kBf16}, {Values(kCols), {kCols}, kBf16}},
        [](std::vector<Tensor>& t) { ops::AddBias(t[0], t[1]); });
  // 40 columns: whole 8-element vectors per row (the GPU's vector path when
  // aligned).
  Check("bias_activation gelu, 40 columns",
        {{Values(kRows * 40, 2.f), {kRows, 40}, kBf16}, {Values(40), {40}, kBf16},
         {Values(kRows * 40), {kRows, 40}, kBf16}, {Values(kRows * 40), {kRows, 40}, kBf16}},
        [](std::vector<Tensor>& t) {
          ops::BiasActivation(Activation::kGelu, t[0], t[1], &t[2], t[3]);
          ops::BiasActivation(Activation::kRelu, t[0], t[1], nullptr, t[0]);
        });
}

TEST_P(OpsBf16Test, ColumnSumsInEitherDType) {
  for (DType x : {kF32, kBf16}) {
    for (DType out : {kF32, kBf16}) {
      for (float beta : {0.f, 0.5f}) {
        Check(std::string("column_sums x ") + DTypeName(x) + " out " + DTypeName(out),
              {{Values(kN), {kRows, kCols}, x}, {Values(kCols), {kCols}, out}},
              [&](std::vector<Tensor>& t) { ops::ColumnSums(t[0], t[1], beta, 0.25f); });
      }
    }
  }
}

TEST_P(OpsBf16Test, LossesArgmaxAndCounts) {
  const int64_t rows = 53, classes = 10;
  std::vector<float> labels(rows);
  for (float& l : labels) l = static_cast<float>(rng_.UniformInt(classes));
  Check("softmax_cross_entropy",
        {{Values(rows * classes, 3.f), {rows, classes}, kBf16}, {labels, {rows}, kF32},
         {{0.f}, {1}, kF32}, {Values(rows * classes), {rows, classes}, kBf16}},
        [](std::vector<Tensor>& t) { ops::SoftmaxCrossEntropy(t[0], t[1], t[2], &t[3]); });
  for (DType pred : {kF32, kBf16}) {
    for (DType target : {kF32, kBf16}) {
      Check(std::string("mse pred ") + DTypeName(pred) + " target " + DTypeName(target),
            {{Values(kN), {kRows, kCols}, pred}, {Values(kN), {kRows, kCols}, target},
             {{0.f}, {1}, kF32}, {Values(kN), {kRows, kCols}, pred}},
            [](std::vector<Tensor>& t) { ops::Mse(t[0], t[1], t[2], &t[3]); });
    }
  }
  Check("sum_of_squares", {{Values(kN), {kRows, kCols}, kBf16}, {{0.f}, {1}, kF32}},
        [](std::vector<Tensor>& t) { ops::SumOfSquares(t[0], t[1]); });
  // Indices and counts are float32 and exact: the same inputs, the same
  // comparisons.
  Check("argmax and count_correct",
        {{Values(rows * classes), {rows, classes}, kBf16}, {labels, {rows}, kF32},
         {Values(rows), {rows}, kF32}, {{0.f}, {1}, kF32}},
        [](std::vector<Tensor>& t) {
          ops::Argmax(t[0], t[2]);
          ops::CountCorrect(t[0], t[1], t[3]);
        });
  Check("dropout_mask", {{Values(kN), {kN}, kBf16}},
        [](std::vector<Tensor>& t) { ops::DropoutMask(0.3f, 5, 11, t[0]); });
}

// Updates: float32 parameter and state, a gradient of either dtype, and a
// working copy of either dtype written in the same pass.
TEST_P(OpsBf16Test, OptimizerUpdatesWithWorkingCopies) {
  SgdParams sgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 1e-3f;
  AdamWParams adamw;
  adamw.lr = 0.01f;
  for (DType grad : {kF32, kBf16}) {
    for (DType working : {kF32, kBf16}) {
      const std::string dtypes =
          std::string(" grad ") + DTypeName(grad) + " working " + DTypeName(working);
      Check("sgd" + dtypes,
            {{Values(kN), {kN}, kF32}, {Values(kN), {kN}, grad}, {Values(kN), {kN}, kF32},
             {Values(kN), {kN}, working}},
            [&](std::vector<Tensor>& t) { ops::SgdUpdate(sgd, t[0], t[1], &t[2], &t[3]); });
      std::vector<float> v = Values(kN, 0.1f);
      for (float& x : v) x = x * x;
      Check("adamw" + dtypes,
            {{Values(kN), {kN}, kF32}, {Values(kN), {kN}, grad}, {Values(kN, 0.1f), {kN}, kF32},
             {v, {kN}, kF32}, {Values(kN), {kN}, working}},
            [&](std::vector<Tensor>& t) {
              ops::AdamWUpdate(adamw, 2, t[0], t[1], t[2], t[3], &t[4]);
            });
    }
  }
  Check("sgd without momentum or working copy",
        {{Values(kN), {kN}, kF32}, {Values(kN), {kN}, kBf16}},
        [&](std::vector<Tensor>& t) { ops::SgdUpdate(SgdParams{}, t[0], t[1], nullptr); });
}

// The working copy is the updated parameter rounded once: bit for bit what
// Cast gives from the parameter (float32: the parameter itself).
TEST_P(OpsBf16Test, WorkingCopyIsTheRoundedParameter) {
  std::vector<float> pv(kN), gv(kN);
  for (float& x : pv) x = rng_.Normal();  // not bfloat16-representable
  for (float& x : gv) x = rng_.Normal();
  Tensor param = Tensor::FromVector(pv, {kN}, device());
  Tensor grad = Tensor::FromVector(gv, {kN}, device(), kBf16);
  Tensor m = Tensor::Zeros({kN}, device()), v = Tensor::Zeros({kN}, device());
  Tensor working = Tensor::Full({kN}, NAN, device(), kBf16);
  Tensor working32 = Tensor::Full({kN}, NAN, device());
  Tensor cast = Tensor::Empty({kN}, device(), kBf16);
  ops::AdamWUpdate(AdamWParams{}, 1, param, grad, m, v, &working);
  ops::Cast(param, cast);
  const std::vector<float> p = param.ToVector(), w = working.ToVector();
  EXPECT_EQ(w, cast.ToVector());
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(w[i], RoundToBFloat16(p[i])) << "element " << i;
  ops::SgdUpdate(SgdParams{}, param, grad, nullptr, &working32);
  EXPECT_EQ(working32.ToVector(), param.ToVector());
}

// Mixed dtypes are refused on every backend, naming both: a bfloat16
// operand beside a float32 one, float32 operands with a bfloat16 result, an
// activation's gradient in another dtype than its output gradient.
TEST_P(OpsBf16Test, MixedDTypesAreRefusedNamingBoth) {
  const int64_t m = 7, n = 33, k = 45;
  const Tensor a16 = Tensor::FromVector(Values(m * k), {m, k}, device(), kBf16);
  const Tensor a32 = Tensor::FromVector(Values(m * k), {m, k}, device());
  const Tensor b = Tensor::FromVector(Values(n * k), {n, k}, device());
  Tensor d32 = Tensor::Empty({m, n}, device());
  Tensor d16 = Tensor::Empty({m, n}, device(), kBf16);
  auto refused = [](const std::function<void()>& op, const std::string& text) {
    try {
      op();
      ADD_FAILURE() << "taken; expected: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  refused([&] { ops::Gemm(a16, false, b, true, d32); },
          "Gemm: a is bfloat16 [7, 45] but b is float32 [33, 45]: they must share a dtype");
  refused([&] { ops::Gemm(a32, false, b, true, d16); },
          "Gemm: float32 a and b give a float32 result, but d is bfloat16");
  const Tensor x = Tensor::FromVector(Values(kN, 2.f), {kRows, kCols}, device(), kBf16);
  const Tensor dy16 = Tensor::FromVector(Values(kN), {kRows, kCols}, device(), kBf16);
  Tensor dz = Tensor::Empty({kRows, kCols}, device());
  Tensor sums = Tensor::Empty({kCols}, device());
  refused([&] { ops::ActivationBackward(Activation::kRelu, x, dy16, dz); },
          "ActivationBackward: dy is bfloat16 [37, 29] but dx is float32 [37, 29]");
  refused([&] { ops::ActivationBackwardColumnSums(Activation::kRelu, x, dy16, dz, sums); },
          "ActivationBackwardColumnSums: dy is bfloat16 [37, 29] but dz is float32 [37, 29]");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(OpsBf16Test);

}  // namespace
}  // namespace tandem
