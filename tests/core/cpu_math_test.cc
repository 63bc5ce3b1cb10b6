// Tests core/cpu/cpu_math.h: each function spread over several threads
// gives the same bits as on one (the rule in the header), and equals a plain
// loop written here from the op's definition; and IntraOp::ForRanges covers
// [0, n) once in pieces that depend on n and the grain only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/cpu/cpu_math.h"
#include "core/cpu/cpu_thread_pool.h"
#include "core/dtype.h"
#include "core/kernel_math.h"
#include "tests/support/intra_op_runs.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

// Larger than a piece (32768 elements), and not a multiple of one.
constexpr int64_t kRows = 300, kCols = 333, kSize = kRows * kCols;

using testing_support::OnOneAndFour;
using testing_support::RandomNormals;

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

class CpuMathTest : public ::testing::Test {
 protected:
  const std::vector<float> x_ = RandomNormals(kSize, 1), y_ = RandomNormals(kSize, 2);
  const std::vector<float> bias_ = RandomNormals(kCols, 3);
};

TEST_F(CpuMathTest, ElementWiseOpsMatchTheirDefinitionOnAnyThreadCount) {
  for (Activation act : kActivations) {
    SCOPED_TRACE(ActivationName(act));
    const auto fwd = OnOneAndFour("ActivationForward", [&](const IntraOp& intra) {
      std::vector<float> out(kSize);
      ActivationForward(intra, act, x_.data(), out.data(), kSize);
      return out;
    });
    const auto bwd = OnOneAndFour("ActivationBackward", [&](const IntraOp& intra) {
      std::vector<float> dx = y_;
      ActivationBackward(intra, act, x_.data(), y_.data(), dx.data(), kSize, true);
      return dx;
    });
    const auto biased = OnOneAndFour("BiasActivation", [&](const IntraOp& intra) {
      std::vector<float> pre(kSize), out(kSize);
      BiasActivation(intra, act, x_.data(), bias_.data(), pre.data(), out.data(), kRows, kCols);
      out.insert(out.end(), pre.begin(), pre.end());
      return out;
    });
    for (int64_t i = 0; i < kSize; i += 97) {
      const float z = x_[i] + bias_[i % kCols];
      ASSERT_EQ(fwd[i], kernel_math::Activate(act, x_[i])) << i;
      ASSERT_EQ(bwd[i], y_[i] + y_[i] * kernel_math::ActivateGrad(act, x_[i])) << i;
      ASSERT_EQ(biased[i], kernel_math::Activate(act, z)) << i;
      ASSERT_EQ(biased[kSize + i], z) << i;
    }
  }
  const auto axpy = OnOneAndFour("Axpy", [&](const IntraOp& intra) {
    std::vector<float> out = y_;
    Axpy(intra, 0.3f, x_.data(), out.data(), kSize);
    return out;
  });
  const auto div = OnOneAndFour("Binary", [&](const IntraOp& intra) {
    std::vector<float> out(kSize);
    Binary(intra, BinaryOp::kDiv, x_.data(), y_.data(), out.data(), kSize);
    return out;
  });
  for (int64_t i = 0; i < kSize; i += 89) {
    ASSERT_EQ(axpy[i], y_[i] + 0.3f * x_[i]) << i;
    ASSERT_EQ(div[i], x_[i] / y_[i]) << i;
  }
}

TEST_F(CpuMathTest, SoftmaxCrossEntropyAddsRowLossesInOrder) {
  constexpr int64_t rows = 5000, classes = 10;  // several pieces of rows
  const std::vector<float> logits = RandomNormals(rows * classes, 4);
  std::vector<float> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<float>((r * 7) % classes);
  float loss_one = 0.f, loss_four = 0.f;
  const auto grad = OnOneAndFour("SoftmaxCrossEntropy", [&](const IntraOp& intra) {
    std::vector<float> d(rows * classes);
    float& loss = intra.threads == 1 ? loss_one : loss_four;
    SoftmaxCrossEntropy(intra, logits.data(), labels.data(), rows, classes, 100.f, &loss,
                        d.data());
    return d;
  });
  EXPECT_EQ(std::memcmp(&loss_one, &loss_four, sizeof(float)), 0);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(row[c]));
    total += std::log(sum) - row[static_cast<int64_t>(labels[r])];
  }
  EXPECT_NEAR(loss_one, total / 100.0, 1e-5 * std::abs(total / 100.0));
  double grad_sum = 0.0;
  for (float g : grad) grad_sum += g;
  EXPECT_NEAR(grad_sum, 0.0, 1e-4);  // each row's softmax minus one-hot sums to 0
}

TEST_F(CpuMathTest, OptimizerUpdatesMatchTheirStepOnAnyThreadCount) {
  SgdParams sgd;
  sgd.lr = 0.1f;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 0.01f;
  std::vector<float> velocity_one(kSize, 0.5f), velocity_four(kSize, 0.5f);
  const auto params = OnOneAndFour("SgdUpdate", [&](const IntraOp& intra) {
    std::vector<float> p = x_;
    SgdUpdate(intra, sgd, p.data(), y_.data(),
              (intra.threads == 1 ? velocity_one : velocity_four).data(), kSize);
    return p;
  });
  ExpectSameBits(velocity_one, velocity_four, "SGD velocity");
  for (int64_t i = 0; i < kSize; i += 101) {
    float p = x_[i], v = 0.5f;
    kernel_math::SgdStep(sgd, p, y_[i], &v);
    ASSERT_EQ(params[i], p) << i;
    ASSERT_EQ(velocity_one[i], v) << i;
  }
}

// The copy an update writes beside the parameters (an optimizer's working
// copy) holds the updated values: rounded to bfloat16, or as they are.
TEST_F(CpuMathTest, UpdatesWriteTheirCopyOfTheUpdatedParameters) {
  AdamWParams adamw;
  adamw.lr = 0.01f;
  std::vector<uint16_t> bits(kSize, 0xffff);  // NaN until written
  std::vector<float> m(kSize, 0.f), v(kSize, 0.f);
  std::vector<float> p = x_;
  IntraOp none;
  AdamWUpdate(none, adamw, 1, p.data(), y_.data(), m.data(), v.data(), kSize,
              Ptr{bits.data(), DType::kBFloat16});
  for (int64_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(bits[i], FloatToBFloat16Bits(p[i])) << "AdamW's bfloat16 copy, element " << i;
  }
  const auto copies = OnOneAndFour("SgdUpdate's copy", [&](const IntraOp& intra) {
    std::vector<float> q = x_, copy(kSize, NAN);
    SgdUpdate(intra, SgdParams{}, q.data(), y_.data(), nullptr, kSize,
              Ptr{copy.data(), DType::kFloat32});
    EXPECT_EQ(std::memcmp(q.data(), copy.data(), kSize * sizeof(float)), 0)
        << intra.threads << " thread(s): SGD's float32 copy differs from the parameters";
    return copy;
  });
  EXPECT_NE(copies[0], x_[0]) << "SGD did not update";
}

// Mse with and without a target (SumOfSquares): the same bits on one and
// four threads, the loss within float rounding of a double sum, and dpred
// its definition.
TEST_F(CpuMathTest, MseSumsInPiecesWhateverTheThreadCount) {
  const float normalizer = 7.f;
  for (const bool with_target : {true, false}) {
    const float* target = with_target ? y_.data() : nullptr;
    std::vector<float> dpred;
    const auto loss = OnOneAndFour("Mse", [&](const IntraOp& intra) {
      std::vector<float> d(kSize), out(1);
      Mse(intra, x_.data(), target, kSize, normalizer, out.data(), d.data());
      dpred = d;
      return out;
    });
    double exact = 0.0;
    for (int64_t i = 0; i < kSize; ++i) {
      const double d = double(x_[i]) - (with_target ? double(y_[i]) : 0.0);
      exact += d * d;
    }
    exact /= normalizer;
    EXPECT_NEAR(loss[0], exact, exact * 1e-7) << "target " << with_target;
    for (int64_t i = 0; i < kSize; i += 97) {
      const float d = with_target ? x_[i] - y_[i] : x_[i];
      ASSERT_EQ(dpred[i], 2.f * d / normalizer) << i;
    }
    // Without dpred, the same loss.
    const auto alone = OnOneAndFour("Mse without dpred", [&](const IntraOp& intra) {
      std::vector<float> out(1);
      Mse(intra, x_.data(), target, kSize, normalizer, out.data(), nullptr);
      return out;
    });
    EXPECT_EQ(alone[0], loss[0]);
  }
}

TEST(IntraOpTest, RangesCoverEveryElementOnceInPiecesFixedByTheGrain) {
  ThreadPool pool;
  for (int threads : {1, 3}) {
    std::mutex mu;
    std::set<std::pair<int64_t, int64_t>> pieces;
    IntraOp{&pool, threads}.ForRanges(1000, 64, [&](int64_t begin, int64_t end) {
      std::lock_guard<std::mutex> lock(mu);
      pieces.emplace(begin, end);
    });
    ASSERT_EQ(pieces.size(), 16u) << threads << " threads";
    int64_t next = 0;
    for (const auto& [begin, end] : pieces) {
      EXPECT_EQ(begin, next);
      EXPECT_EQ(end, std::min<int64_t>(begin + 64, 1000));
      next = end;
    }
    EXPECT_EQ(next, 1000);
  }
  int calls = 0;
  IntraOp{}.ForRanges(0, 64, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// kernel_math::Erf, GELU's erf on both backends: within relative 5e-7 of
// the double-precision erf over [-5, 5] (libm's erff, correctly rounded, is
// within 6e-8), exactly +-1 beyond, NaN for NaN.
TEST(KernelMathTest, ErfIsWithinRelative5e7OfErf) {
  for (int i = -500000; i <= 500000; ++i) {
    if (i == 0) continue;
    const float x = static_cast<float>(i) * 1e-5f;
    const double exact = std::erf(static_cast<double>(x));
    const double relative = std::fabs(kernel_math::Erf(x) - exact) / std::fabs(exact);
    ASSERT_LE(relative, 5e-7) << "x=" << x << " Erf=" << kernel_math::Erf(x) << " erf=" << exact;
  }
  EXPECT_EQ(kernel_math::Erf(0.f), 0.f);
  for (float x : {6.f, 1e30f, INFINITY}) {
    EXPECT_EQ(kernel_math::Erf(x), 1.f) << x;
    EXPECT_EQ(kernel_math::Erf(-x), -1.f) << -x;
  }
  EXPECT_TRUE(std::isnan(kernel_math::Erf(NAN)));
}

// kernel_math::Exp, in GELU's derivative: within relative 3e-7 of the
// double-precision exp over [-87, 88], the smallest normal float below,
// finite and large above, NaN for NaN.
TEST(KernelMathTest, ExpIsWithinRelative3e7OfExp) {
  for (int i = -870000; i <= 880000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    const double exact = std::exp(static_cast<double>(x));
    const double relative = std::fabs(kernel_math::Exp(x) - exact) / exact;
    ASSERT_LE(relative, 3e-7) << "x=" << x << " Exp=" << kernel_math::Exp(x) << " exp=" << exact;
  }
  EXPECT_EQ(kernel_math::Exp(0.f), 1.f);
  EXPECT_EQ(kernel_math::Exp(-1000.f), kernel_math::Exp(-87.3365447505531f));
  EXPECT_LT(kernel_math::Exp(-1000.f), 1.2e-38f);
  EXPECT_GT(kernel_math::Exp(INFINITY), 1e38f);
  EXPECT_TRUE(std::isfinite(kernel_math::Exp(INFINITY)));
  EXPECT_TRUE(std::isnan(kernel_math::Exp(NAN)));
}

}  // namespace
}  // namespace math
}  // namespace cpu
}  // namespace tandem
