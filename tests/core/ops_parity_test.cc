// CUDA-vs-CPU parity on random data, float32 and bfloat16: each op runs on
// CPU tensors and on cuda:0 copies, and the results are compared. A GPU test
// (tagged "gpu"); every case skips, saying why, where no GPU is visible.
//
// Where the two backends compute the same float32 values with correctly
// rounded IEEE operations (one add, subtract or multiply per element, ReLU,
// copies, casts, dropout's 1 / (1 - p), comparisons), the results are equal
// bit for bit, bfloat16 included: both round once, to nearest even
// (Note [bfloat16 rounding on the GPU] in core/cuda/kernel_helpers.cuh).
// Elsewhere they are close, not equal: the GPU contracts a * b + c into one
// fused multiply-add (Axpy, the updates), its tanhf/expf are not
// glibc's (GELU, tanh), and sums run in other orders (GEMM, ColumnSums, the
// losses). There a float32 result is within relative 1e-5 (norm of the
// difference over the norm of the CPU result), and a bfloat16 one within
// 2^-8, one rounding, since the float32 values before it differ by far less.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace tandem {
namespace {

std::vector<float> RandomVector(int64_t n, Rng& rng, float scale = 1.f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.Normal(0.f, scale);
  return v;
}

// Relative error ||a - b|| / ||b||, which is what fp32 tolerances bound.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "CUDA-vs-CPU parity needs a GPU: " << CudaUnavailableReason();
    }
  }
  // Runs `op` on CPU copies and on cuda:0 copies of `inputs` and compares
  // every input/output tensor afterwards.
  void Compare(const std::string& what, std::vector<Tensor> inputs,
               const std::function<void(std::vector<Tensor>&)>& op,
               double tolerance = 1e-5) {
    const std::vector<Tensor> gpu = RunBoth(inputs, op);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const double err = RelativeError(gpu[i].ToVector(), inputs[i].ToVector());
      std::cout << what << " tensor " << i << ": relative error " << err << "\n";
      EXPECT_LE(err, tolerance) << what << " tensor " << i;
    }
  }
  // The same, requiring the same bits in every tensor (bfloat16 tensors
  // widen to float exactly, so equal floats are equal bfloat16 bits).
  void CompareBits(const std::string& what, std::vector<Tensor> inputs,
                   const std::function<void(std::vector<Tensor>&)>& op) {
    const std::vector<Tensor> gpu = RunBoth(inputs, op);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<float> g = gpu[i].ToVector(), c = inputs[i].ToVector();
      ASSERT_EQ(g.size(), c.size());
      int64_t differ = 0, first = -1;
      for (size_t e = 0; e < g.size(); ++e) {
        if (std::memcmp(&g[e], &c[e], sizeof(float)) == 0) continue;
        if (differ++ == 0) first = static_cast<int64_t>(e);
      }
      EXPECT_EQ(differ, 0) << what << " tensor " << i << ": " << differ
                           << " elements differ in their bits, the first at " << first
                           << ": cuda " << (first >= 0 ? g[first] : 0.f) << ", cpu "
                           << (first >= 0 ? c[first] : 0.f);
    }
  }
  Rng rng_{2024};

 private:
  // Runs `op` on `inputs` (CPU tensors) and on cuda:0 copies; returns those.
  static std::vector<Tensor> RunBoth(std::vector<Tensor>& inputs,
                                     const std::function<void(std::vector<Tensor>&)>& op) {
    std::vector<Tensor> gpu;
    for (Tensor& t : inputs) gpu.push_back(t.To(Device::Cuda(0)));
    op(inputs);
    op(gpu);
    return gpu;
  }
};

TEST_F(ParityTest, Gemm) {
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    const int64_t m = 67, n = 45, k = 129;
    Tensor a = Tensor::FromVector(RandomVector(m * k, rng_), ta ? Shape{k, m} : Shape{m, k});
    Tensor b = Tensor::FromVector(RandomVector(k * n, rng_), tb ? Shape{n, k} : Shape{k, n});
    Tensor c = Tensor::FromVector(RandomVector(m * n, rng_), {m, n});
    Compare("gemm" + std::to_string(mode), {a, b, c}, [&](std::vector<Tensor>& t) {
      ops::Gemm(t[0], ta, t[1], tb, t[2], 0.7f, 0.3f);
    });
  }
}

TEST_F(ParityTest, ElementwiseActivationsAndReductions) {
  const int64_t rows = 333, cols = 129;
  Tensor x = Tensor::FromVector(RandomVector(rows * cols, rng_, 2.f), {rows, cols});
  Tensor bias = Tensor::FromVector(RandomVector(cols, rng_), {cols});
  for (Activation act : kActivations) {
    Tensor pre = Tensor::Zeros({rows, cols}), out = Tensor::Zeros({rows, cols});
    Tensor dy = Tensor::FromVector(RandomVector(rows * cols, rng_), {rows, cols});
    Tensor dx = Tensor::FromVector(RandomVector(rows * cols, rng_), {rows, cols});
    Compare(std::string("bias_activation/") + ActivationName(act),
            {x, bias, pre, out, dy, dx}, [&](std::vector<Tensor>& t) {
              ops::BiasActivation(act, t[0], t[1], &t[2], t[3]);
              ops::ActivationBackward(act, t[2], t[4], t[5], /*accumulate=*/true);
            });
  }
  Tensor sums = Tensor::FromVector(RandomVector(cols, rng_), {cols});
  Compare("column_sums", {x, sums},
          [](std::vector<Tensor>& t) { ops::ColumnSums(t[0], t[1], 0.5f); });
  Tensor y = Tensor::FromVector(RandomVector(rows * cols, rng_), {rows, cols});
  Tensor out = Tensor::Zeros({rows, cols});
  Compare("binary+axpy+scale", {x, y, out}, [](std::vector<Tensor>& t) {
    ops::Mul(t[0], t[1], t[2]);
    ops::Axpy(-0.5f, t[0], t[2]);
    ops::Scale(t[2], 3.f);
  });
}

TEST_F(ParityTest, LossesArgmaxDropout) {
  const int64_t rows = 517, classes = 10;
  Tensor logits = Tensor::FromVector(RandomVector(rows * classes, rng_, 3.f), {rows, classes});
  std::vector<float> label_values(rows);
  for (float& l : label_values) l = static_cast<float>(rng_.UniformInt(classes));
  Tensor labels = Tensor::FromVector(label_values, {rows});
  Tensor loss = Tensor::Zeros({1}), grad = Tensor::Zeros({rows, classes});
  Tensor idx = Tensor::Zeros({rows}), correct = Tensor::Zeros({1});
  Compare("softmax_ce+argmax", {logits, labels, loss, grad, idx, correct},
          [](std::vector<Tensor>& t) {
            ops::SoftmaxCrossEntropy(t[0], t[1], t[2], &t[3], 1000.f);
            ops::Argmax(t[0], t[4]);
            ops::CountCorrect(t[0], t[1], t[5]);
          });
  Tensor target = Tensor::FromVector(RandomVector(rows * classes, rng_), {rows, classes});
  Tensor mse_grad = Tensor::Zeros({rows, classes});
  Compare("mse", {logits, target, loss, mse_grad}, [](std::vector<Tensor>& t) {
    ops::Mse(t[0], t[1], t[2], &t[3]);
  });
  Compare("sum_of_squares", {Tensor::FromVector(RandomVector(300007, rng_), {300007}), loss},
          [](std::vector<Tensor>& t) { ops::SumOfSquares(t[0], t[1]); });
  Tensor mask = Tensor::Zeros({100003});
  Compare("dropout_mask (bitwise)", {mask},
          [](std::vector<Tensor>& t) { ops::DropoutMask(0.3f, 77, 123, t[0]); },
          /*tolerance=*/0.0);
}

TEST_F(ParityTest, OptimizerUpdates) {
  const int64_t n = 100001;
  Tensor p = Tensor::FromVector(RandomVector(n, rng_), {n});
  Tensor g = Tensor::FromVector(RandomVector(n, rng_), {n});
  Tensor v = Tensor::FromVector(RandomVector(n, rng_), {n});
  Tensor m2 = Tensor::FromVector(RandomVector(n, rng_, 0.1f), {n});
  Tensor v2 = Tensor::FromVector(RandomVector(n, rng_, 0.1f), {n});
  SgdParams s;
  s.lr = 0.05f;
  s.momentum = 0.9f;
  s.nesterov = true;
  s.weight_decay = 1e-4f;
  Compare("sgd", {p, g, v}, [&](std::vector<Tensor>& t) { ops::SgdUpdate(s, t[0], t[1], &t[2]); });
  // AdamW needs v >= 0.
  ops::Mul(v2, v2, v2);
  AdamWParams a;
  Compare("adamw", {p, g, m2, v2}, [&](std::vector<Tensor>& t) {
    ops::AdamWUpdate(a, 3, t[0], t[1], t[2], t[3]);
  });
}

// ---- bfloat16 ----

constexpr DType kBf16 = DType::kBFloat16;
constexpr double kBf16Tolerance = 1.0 / 256;  // one rounding: 2^-8

// A CPU tensor of random values rounded to bfloat16.
Tensor RandomBf16(const Shape& shape, Rng& rng, float scale = 1.f) {
  return Tensor::FromVector(RandomVector(NumElements(shape), rng, scale), shape,
                            Device::Cpu(), kBf16);
}

// float32 values of which every 5th lies exactly halfway between two
// bfloat16 values, so a cast must break ties (to even) alike.
std::vector<float> WithTies(std::vector<float> v) {
  for (size_t i = 0; i < v.size(); i += 5) {
    const uint32_t bits = (uint32_t{FloatToBFloat16Bits(v[i])} << 16) | 0x8000u;
    std::memcpy(&v[i], &bits, sizeof(bits));
  }
  return v;
}

// 333 * 129 elements: not a multiple of 8, so the GPU's vector kernels run
// with their scalar tails.
constexpr int64_t kRows = 333, kCols = 129;

TEST_F(ParityTest, BFloat16CastsFillAndArithmeticAreBitwise) {
  const Shape shape{kRows, kCols};
  Tensor wide = Tensor::FromVector(WithTies(RandomVector(kRows * kCols, rng_, 3.f)), shape);
  CompareBits("cast float32 -> bfloat16", {wide, Tensor::Zeros(shape, Device::Cpu(), kBf16)},
              [](std::vector<Tensor>& t) { ops::Cast(t[0], t[1]); });
  CompareBits("cast bfloat16 -> float32 and fill", {RandomBf16(shape, rng_), Tensor::Zeros(shape)},
              [](std::vector<Tensor>& t) {
                ops::Cast(t[0], t[1]);
                ops::Fill(t[0], 0.1f);
              });
  CompareBits("add, sub, mul, scale",
              {RandomBf16(shape, rng_), RandomBf16(shape, rng_),
               Tensor::Zeros(shape, Device::Cpu(), kBf16)},
              [](std::vector<Tensor>& t) {
                ops::Add(t[0], t[1], t[2]);
                ops::Sub(t[2], t[1], t[0]);
                ops::Mul(t[0], t[1], t[2]);
                ops::Scale(t[2], 0.3f);
              });
  CompareBits("dropout_mask", {Tensor::Zeros({100003}, Device::Cpu(), kBf16)},
              [](std::vector<Tensor>& t) { ops::DropoutMask(0.3f, 77, 123, t[0]); });
}

TEST_F(ParityTest, BFloat16BiasReluAndArgmaxAreBitwise) {
  // 129 columns take the GPU's scalar bias path, 128 its vector path.
  for (int64_t cols : {kCols, kCols - 1}) {
    const Shape shape{kRows, cols};
    Tensor x = RandomBf16(shape, rng_, 2.f), bias = RandomBf16({cols}, rng_);
    for (Activation act : {Activation::kIdentity, Activation::kRelu}) {
      CompareBits(std::string("bias_activation/") + ActivationName(act) + ", " +
                      std::to_string(cols) + " columns",
                  {x, bias, Tensor::Zeros(shape, Device::Cpu(), kBf16),
                   Tensor::Zeros(shape, Device::Cpu(), kBf16), RandomBf16(shape, rng_),
                   RandomBf16(shape, rng_)},
                  [&](std::vector<Tensor>& t) {
                    ops::BiasActivation(act, t[0], t[1], &t[2], t[3]);
                    ops::ActivationForward(act, t[2], t[3]);
                    ops::ActivationBackward(act, t[2], t[4], t[5], /*accumulate=*/true);
                    ops::ActivationBackward(act, t[0], t[5], t[4]);
                  });
    }
  }
  const int64_t rows = 517, classes = 10;
  std::vector<float> label_values(rows);
  for (float& l : label_values) l = static_cast<float>(rng_.UniformInt(classes));
  CompareBits("argmax+count_correct",
              {RandomBf16({rows, classes}, rng_, 3.f), Tensor::FromVector(label_values, {rows}),
               Tensor::Zeros({rows}), Tensor::Zeros({1})},
              [](std::vector<Tensor>& t) {
                ops::Argmax(t[0], t[2]);
                ops::CountCorrect(t[0], t[1], t[3]);
              });
}

TEST_F(ParityTest, BFloat16ActivationsSumsAndLosses) {
  const Shape shape{kRows, kCols};
  Tensor x = RandomBf16(shape, rng_, 2.f), bias = RandomBf16({kCols}, rng_);
  for (Activation act : {Activation::kGelu, Activation::kTanh, Activation::kSigmoid,
                         Activation::kSilu}) {
    Compare(std::string("bias_activation/") + ActivationName(act),
            {x, bias, Tensor::Zeros(shape, Device::Cpu(), kBf16),
             Tensor::Zeros(shape, Device::Cpu(), kBf16), RandomBf16(shape, rng_),
             RandomBf16(shape, rng_)},
            [&](std::vector<Tensor>& t) {
              ops::BiasActivation(act, t[0], t[1], &t[2], t[3]);
              ops::ActivationBackward(act, t[2], t[4], t[5], /*accumulate=*/true);
            },
            kBf16Tolerance);
  }
  Compare("axpy", {RandomBf16(shape, rng_), RandomBf16(shape, rng_), Tensor::Zeros(shape)},
          [](std::vector<Tensor>& t) {
            ops::Axpy(-0.5f, t[0], t[1]);  // bfloat16 into bfloat16
            ops::Axpy(2.f, t[1], t[2]);    // bfloat16 into float32
          },
          kBf16Tolerance);
  Compare("column_sums into float32", {x, Tensor::FromVector(RandomVector(kCols, rng_), {kCols})},
          [](std::vector<Tensor>& t) { ops::ColumnSums(t[0], t[1], 0.5f); });
  Compare("column_sums into bfloat16", {x, RandomBf16({kCols}, rng_)},
          [](std::vector<Tensor>& t) { ops::ColumnSums(t[0], t[1], 0.5f); }, kBf16Tolerance);
  const int64_t rows = 517, classes = 10;
  Tensor logits = RandomBf16({rows, classes}, rng_, 3.f);
  std::vector<float> label_values(rows);
  for (float& l : label_values) l = static_cast<float>(rng_.UniformInt(classes));
  Tensor labels = Tensor::FromVector(label_values, {rows});
  Compare("softmax_ce loss", {logits, labels, Tensor::Zeros({1})},
          [](std::vector<Tensor>& t) { ops::SoftmaxCrossEntropy(t[0], t[1], t[2], nullptr); });
  Compare("softmax_ce gradient",
          {logits, labels, Tensor::Zeros({1}), Tensor::Zeros({rows, classes}, Device::Cpu(), kBf16)},
          [](std::vector<Tensor>& t) { ops::SoftmaxCrossEntropy(t[0], t[1], t[2], &t[3]); },
          kBf16Tolerance);
  Tensor target = Tensor::FromVector(RandomVector(rows * classes, rng_), {rows, classes});
  Compare("mse loss", {logits, target, Tensor::Zeros({1})},
          [](std::vector<Tensor>& t) { ops::Mse(t[0], t[1], t[2], nullptr); });
  Compare("mse gradient",
          {logits, target, Tensor::Zeros({1}), Tensor::Zeros({rows, classes}, Device::Cpu(), kBf16)},
          [](std::vector<Tensor>& t) { ops::Mse(t[0], t[1], t[2], &t[3]); }, kBf16Tolerance);
  Compare("sum_of_squares", {RandomBf16({300007}, rng_), Tensor::Zeros({1})},
          [](std::vector<Tensor>& t) { ops::SumOfSquares(t[0], t[1]); });
}

TEST_F(ParityTest, BFloat16OptimizerUpdatesWithWorkingCopies) {
  const int64_t n = 100001;
  Tensor p = Tensor::FromVector(RandomVector(n, rng_), {n});
  Tensor g = RandomBf16({n}, rng_);
  Tensor v = Tensor::FromVector(RandomVector(n, rng_), {n});
  Tensor m2 = Tensor::FromVector(RandomVector(n, rng_, 0.1f), {n});
  Tensor v2 = Tensor::FromVector(RandomVector(n, rng_, 0.1f), {n});
  ops::Mul(v2, v2, v2);  // AdamW needs v >= 0
  SgdParams s;
  s.lr = 0.05f;
  s.momentum = 0.9f;
  s.weight_decay = 1e-4f;
  Compare("sgd, bfloat16 gradient", {p, g, v},
          [&](std::vector<Tensor>& t) { ops::SgdUpdate(s, t[0], t[1], &t[2]); });
  Compare("adamw, bfloat16 gradient", {p, g, m2, v2}, [&](std::vector<Tensor>& t) {
    ops::AdamWUpdate(AdamWParams{}, 3, t[0], t[1], t[2], t[3]);
  });
  Compare("sgd and adamw working copies",
          {p, g, v, m2, v2, Tensor::Zeros({n}, Device::Cpu(), kBf16)},
          [&](std::vector<Tensor>& t) {
            ops::SgdUpdate(s, t[0], t[1], &t[2], &t[5]);
            ops::AdamWUpdate(AdamWParams{}, 3, t[0], t[1], t[3], t[4], &t[5]);
          },
          kBf16Tolerance);
}

// bfloat16 GEMMs (cuBLASLt on the GPU) accumulate in float32 in another
// order than the CPU's and round once: within one rounding. A GELU epilogue
// is a second pass on the GPU, which rounds the product too (see
// CudaContext::Gemm): two roundings, 2^-7, plus GELU's slope.
TEST_F(ParityTest, BFloat16Gemm) {
  const int64_t m = 67, n = 45, k = 129;
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    Tensor a = RandomBf16(ta ? Shape{k, m} : Shape{m, k}, rng_);
    Tensor b = RandomBf16(tb ? Shape{n, k} : Shape{k, n}, rng_);
    Compare("bf16 gemm" + std::to_string(mode),
            {a, b, RandomBf16({m, n}, rng_), Tensor::FromVector(RandomVector(m * n, rng_), {m, n})},
            [&](std::vector<Tensor>& t) {
              ops::Gemm(t[0], ta, t[1], tb, t[2], 0.7f, 0.3f);  // bfloat16 result
              ops::Gemm(t[0], ta, t[1], tb, t[3], 0.7f, 0.3f);  // float32 result
            },
            kBf16Tolerance);
  }
  Tensor x = RandomBf16({m, k}, rng_), w = RandomBf16({n, k}, rng_), bias = RandomBf16({n}, rng_);
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    Compare(std::string("bf16 gemm + bias + ") + ActivationName(act),
            {x, w, bias, Tensor::Zeros({m, n}, Device::Cpu(), kBf16)},
            [&](std::vector<Tensor>& t) {
              ops::GemmOptions o;
              o.bias = &t[2];
              o.activation = act;
              ops::Gemm(t[0], false, t[1], true, t[3], o);
            },
            act == Activation::kRelu ? kBf16Tolerance : 4 * kBf16Tolerance);
  }
}

}  // namespace
}  // namespace tandem
