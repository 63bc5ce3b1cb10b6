// CUDA-vs-CPU parity of the math ops of core/ops_math.h on random data,
// float32 and bfloat16, and a check that none of them waits for the GPU on
// the host. A GPU test (tagged "gpu"); every case skips, saying why, where
// no GPU is visible.
//
// Bit for bit where both backends compute the same correctly rounded
// float32 operations and round once (core/elementwise_math.h): divide,
// sqrt, rsqrt, reciprocal, the scalar ops and the broadcasts; the ops that
// move elements (transpose, gather); and ScatterAddRows, whose order of
// additions is its contract. Close elsewhere: expf and logf are each
// platform's own, and the GPU's reductions and softmax sum in a block's
// tree order, not left to right: float32 results within relative 1e-5
// (norm of the difference over the norm of the CPU result), bfloat16 ones
// within 2^-8, one rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace tandem {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kBf16 = DType::kBFloat16;
constexpr double kBf16Tolerance = 1.0 / 256;

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

using Op = std::function<void(std::vector<Tensor>&)>;

class MathParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "CUDA-vs-CPU parity needs a GPU: " << CudaUnavailableReason();
    }
  }
  // A CPU tensor of normal values (mean, stddev) in `dtype`.
  Tensor Random(const Shape& shape, DType dtype, float mean = 0.f, float stddev = 1.f) {
    std::vector<float> v(NumElements(shape));
    for (float& x : v) x = rng_.Normal(mean, stddev);
    return Tensor::FromVector(v, shape, Device::Cpu(), dtype);
  }
  Tensor Positive(const Shape& shape, DType dtype) {
    std::vector<float> v(NumElements(shape));
    for (float& x : v) x = rng_.Uniform(1e-3f, 1e3f);
    return Tensor::FromVector(v, shape, Device::Cpu(), dtype);
  }
  Tensor Indices(int64_t n, int64_t table_rows) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(rng_.UniformInt(table_rows));
    return Tensor::FromVector(v, {n});
  }

  // Runs `op` on `inputs` (CPU tensors) and on cuda:0 copies, and requires
  // every tensor to hold the same bits afterwards.
  void CompareBits(const std::string& what, std::vector<Tensor> inputs, const Op& op) {
    const std::vector<Tensor> gpu = RunBoth(inputs, op);
    for (size_t t = 0; t < inputs.size(); ++t) {
      const std::vector<float> g = gpu[t].ToVector(), c = inputs[t].ToVector();
      int64_t differ = 0, first = -1;
      for (size_t e = 0; e < g.size(); ++e) {
        if (std::isnan(g[e]) && std::isnan(c[e])) continue;
        if (std::memcmp(&g[e], &c[e], sizeof(float)) != 0 && differ++ == 0) first = e;
      }
      EXPECT_EQ(differ, 0) << what << " tensor " << t << ": " << differ
                           << " elements differ in their bits, the first at " << first;
    }
  }
  // The same within `tolerance` (relative, in the L2 norm).
  void Compare(const std::string& what, std::vector<Tensor> inputs, const Op& op,
               double tolerance) {
    const std::vector<Tensor> gpu = RunBoth(inputs, op);
    for (size_t t = 0; t < inputs.size(); ++t) {
      const double err = RelativeError(gpu[t].ToVector(), inputs[t].ToVector());
      std::cout << what << " tensor " << t << ": relative error " << err << "\n";
      EXPECT_LE(err, tolerance) << what << " tensor " << t;
    }
  }

  Rng rng_{31};

 private:
  static std::vector<Tensor> RunBoth(std::vector<Tensor>& inputs, const Op& op) {
    std::vector<Tensor> gpu;
    for (Tensor& t : inputs) gpu.push_back(t.To(Device::Cuda(0)));
    op(inputs);
    op(gpu);
    return gpu;
  }
};

// 333 x 129: not a multiple of 8 elements or of 32-wide tiles.
constexpr int64_t kRows = 333, kCols = 129;

TEST_F(MathParityTest, ElementwiseAndBroadcastsAreBitwise) {
  const Shape shape{kRows, kCols};
  for (DType d : {kF32, kBf16}) {
    const std::string name = DTypeName(d);
    CompareBits("sqrt, rsqrt, reciprocal " + name,
                {Positive(shape, d), Tensor::Zeros(shape, Device::Cpu(), d),
                 Tensor::Zeros(shape, Device::Cpu(), d), Random(shape, d)},
                [](std::vector<Tensor>& t) {
                  ops::Sqrt(t[0], t[1]);
                  ops::Rsqrt(t[0], t[2]);
                  ops::Reciprocal(t[3], t[3]);
                });
    CompareBits("div and scalars " + name,
                {Random(shape, d), Random(shape, d), Tensor::Zeros(shape, Device::Cpu(), d)},
                [](std::vector<Tensor>& t) {
                  ops::Div(t[0], t[1], t[2]);
                  ops::AddScalar(t[2], 0.7f, t[2]);
                  ops::MulScalar(t[0], -1.3f, t[1]);
                });
    CompareBits("broadcasts " + name,
                {Random(shape, d), Random({kCols}, d), Random({kRows}, d),
                 Tensor::Zeros(shape, Device::Cpu(), d)},
                [](std::vector<Tensor>& t) {
                  ops::BroadcastAdd(t[0], t[1], Broadcast::kRow, t[3]);
                  ops::BroadcastMul(t[3], t[2], Broadcast::kColumn, t[3]);
                  ops::BroadcastSub(t[3], t[2], Broadcast::kColumn, t[3]);
                  ops::BroadcastDiv(t[3], t[1], Broadcast::kRow, t[3]);
                });
  }
}

TEST_F(MathParityTest, MovingRowsAndScatterAddAreBitwise) {
  const int64_t table_rows = 50, n = 3000, cols = 300;
  for (DType d : {kF32, kBf16}) {
    const std::string name = DTypeName(d);
    CompareBits("transpose " + name, {Random({kRows, kCols}, d),
                                      Tensor::Zeros({kCols, kRows}, Device::Cpu(), d)},
                [](std::vector<Tensor>& t) { ops::Transpose(t[0], t[1]); });
    CompareBits("gather " + name,
                {Random({table_rows, cols}, d), Indices(n, table_rows),
                 Tensor::Zeros({n, cols}, Device::Cpu(), d)},
                [](std::vector<Tensor>& t) { ops::GatherRows(t[0], t[1], t[2]); });
    for (DType table : {kF32, kBf16}) {
      CompareBits("scatter-add src " + name + " table " + DTypeName(table),
                  {Random({n, cols}, d), Indices(n, table_rows), Random({table_rows, cols}, table)},
                  [](std::vector<Tensor>& t) { ops::ScatterAddRows(t[0], t[1], t[2]); });
    }
  }
}

TEST_F(MathParityTest, ExpLogReductionsAndSoftmaxAreClose) {
  const Shape shape{kRows, kCols};
  for (DType d : {kF32, kBf16}) {
    const std::string name = DTypeName(d);
    const double tolerance = d == kBf16 ? kBf16Tolerance : 1e-5;
    Compare("exp and log " + name,
            {Random(shape, d, 0.f, 5.f), Positive(shape, d), Tensor::Zeros(shape, Device::Cpu(), d),
             Tensor::Zeros(shape, Device::Cpu(), d)},
            [](std::vector<Tensor>& t) {
              ops::Exp(t[0], t[2]);
              ops::Log(t[1], t[3]);
            },
            tolerance);
    Compare("softmax " + name, {Random({kRows, 1000}, d, 0.f, 4.f)},
            [](std::vector<Tensor>& t) { ops::Softmax(t[0], t[0]); }, tolerance);
    for (DType out : {kF32, kBf16}) {
      const Tensor per_row = Tensor::Zeros({kRows}, Device::Cpu(), out);
      Compare("row reductions x " + name + " out " + DTypeName(out),
              {Random({kRows, 1000}, d, 3.f, 2.f), per_row.Clone(), per_row.Clone(),
               per_row.Clone(), per_row.Clone()},
              [](std::vector<Tensor>& t) {
                ops::RowSum(t[0], t[1]);
                ops::RowMean(t[0], t[2]);
                ops::RowMax(t[0], t[3]);
                ops::RowVariance(t[0], t[4]);
              },
              out == kBf16 ? kBf16Tolerance : 1e-5);
    }
  }
}

// Every math op only queues work: the host never waits for the GPU inside
// one (cuda::HostWaitCount counts every Tandem wrapper that blocks).
TEST_F(MathParityTest, NoOpWaitsOnTheHost) {
  const Device gpu = Device::Cuda(0);
  const int64_t rows = 64, cols = 96;
  Tensor x = Random({rows, cols}, kF32).To(gpu), y = Random({rows, cols}, kF32).To(gpu);
  Tensor out = Tensor::Empty({rows, cols}, gpu), vec = Random({cols}, kF32).To(gpu);
  Tensor per_row = Tensor::Empty({rows}, gpu), transposed = Tensor::Empty({cols, rows}, gpu);
  Tensor indices = Indices(rows, rows).To(gpu), table = Random({rows, cols}, kF32).To(gpu);
  GetBackend(gpu).Synchronize();
  const int64_t before = cuda::HostWaitCount();
  ops::Exp(x, out);
  ops::Log(out, out);
  ops::Sqrt(out, out);
  ops::Rsqrt(out, out);
  ops::Reciprocal(out, out);
  ops::Div(x, y, out);
  ops::AddScalar(out, 1.f, out);
  ops::MulScalar(out, 2.f, out);
  ops::RowSum(x, per_row);
  ops::RowMean(x, per_row);
  ops::RowMax(x, per_row);
  ops::RowVariance(x, per_row);
  ops::BroadcastAdd(x, vec, Broadcast::kRow, out);
  ops::BroadcastMul(out, per_row, Broadcast::kColumn, out);
  ops::Softmax(x, out);
  ops::Transpose(x, transposed);
  ops::GatherRows(table, indices, out);
  ops::ScatterAddRows(out, indices, table);
  EXPECT_EQ(cuda::HostWaitCount(), before) << "a math op waited for the GPU on the host";
  GetBackend(gpu).Synchronize();
}

}  // namespace
}  // namespace tandem
