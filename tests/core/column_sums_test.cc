// Column sums on every device: exact sums over tails of rows and columns
// and over several chunks of rows, the fused activation-gradient pass
// against the two ops it replaces, and, on GPUs, the documented order of
// addition (Note [Column sums in chunks] in core/cuda/kernels_reduce.cu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/rng.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class ColumnSumsTest : public DeviceTest {};

// Small integers add up exactly in float32 in any order, so every shape
// must give the exact sums: tails of rows and columns, several chunks of
// rows on a GPU (Note [Column sums in chunks] in core/cuda/kernels_reduce.cu),
// column counts that rule out its vector loads, and a bfloat16 input.
TEST_P(ColumnSumsTest, ColumnSumsOfTallAndOddShapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1000, 300}, {4096, 264}, {513, 8}, {3, 2000}, {700, 1}, {2049, 33}};
  for (const auto& [rows, cols] : shapes) {
    std::vector<float> x(static_cast<size_t>(rows * cols));
    std::vector<float> expected(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float v = static_cast<float>((r * 7 + c * 3) % 17 - 8);
        x[static_cast<size_t>(r * cols + c)] = v;
        expected[static_cast<size_t>(c)] += v;
      }
    }
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " " + DTypeName(dtype));
      Tensor input = Tensor::FromVector(x, {rows, cols}, device(), dtype);
      Tensor sums = Tensor::Full({cols}, 3.f, device());
      ops::ColumnSums(input, sums, 2.f, 0.5f);  // 2 * 3 + 0.5 * sum
      std::vector<float> scaled(expected);
      for (float& v : scaled) v = 6.f + 0.5f * v;
      EXPECT_EQ(sums.ToVector(), scaled);
      ops::ColumnSums(input, sums);
      EXPECT_EQ(sums.ToVector(), expected);
    }
  }
}

// The fused pass gives the bits of ActivationBackward then ColumnSums, for
// each activation and dtype, shapes over several chunks and with odd
// columns, dz written over dy, and sums written (beta 0) or added to.
TEST_P(ColumnSumsTest, ActivationBackwardColumnSumsIsBackwardThenSums) {
  Rng rng(21);
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {600, 264}, {37, 13}, {1, 8}}) {
    std::vector<float> xv(static_cast<size_t>(rows * cols)), gv(xv.size());
    for (float& v : xv) v = rng.Normal();
    for (float& v : gv) v = rng.Normal();
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (Activation act : kActivations) {
        if (act == Activation::kIdentity) continue;
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " " +
                     DTypeName(dtype) + " " + ActivationName(act));
        const Tensor x = Tensor::FromVector(xv, {rows, cols}, device(), dtype);
        const Tensor dy = Tensor::FromVector(gv, {rows, cols}, device(), dtype);
        Tensor dz = Tensor::Empty({rows, cols}, device(), dtype);
        Tensor sums = Tensor::Empty({cols}, device());
        ops::ActivationBackward(act, x, dy, dz);
        ops::ColumnSums(dz, sums);
        Tensor fused_dz = Tensor::FromVector(gv, {rows, cols}, device(), dtype);  // over dy
        Tensor fused_sums = Tensor::Full({cols}, NAN, device());
        ops::ActivationBackwardColumnSums(act, x, fused_dz, fused_dz, fused_sums);
        EXPECT_EQ(fused_dz.ToVector(), dz.ToVector());
        EXPECT_EQ(fused_sums.ToVector(), sums.ToVector());
        // beta = 1 adds to what the sums held.
        ops::ColumnSums(dz, sums, 1.f);
        Tensor again = Tensor::Empty({rows, cols}, device(), dtype);
        ops::ActivationBackwardColumnSums(act, x, dy, again, fused_sums, 1.f);
        EXPECT_EQ(fused_sums.ToVector(), sums.ToVector());
      }
    }
  }
  Tensor x = Tensor::Zeros({4, 3}, device());
  Tensor wrong = Tensor::Zeros({4}, device());
  EXPECT_NE(testing::ErrorText([&] {
              ops::ActivationBackwardColumnSums(Activation::kRelu, x, x, x, wrong);
            }).find("ActivationBackwardColumnSums: sums [4] for x [4, 3]"),
            std::string::npos);
}

// The GPU's order of addition is the documented one (a float32 emulation of
// it gives the same bits): the order is a function of the shape alone.
TEST_P(ColumnSumsTest, ColumnSumsAddInTheDocumentedOrderOnGpus) {
  if (!device().is_cuda()) GTEST_SKIP() << "the order of the CUDA kernel";
  const int64_t rows = 1500, cols = 520;  // 6 chunks of 256 rows
  Rng rng(7);
  std::vector<float> host(static_cast<size_t>(rows * cols));
  for (float& v : host) v = rng.Normal();
  Tensor x = Tensor::FromVector(host, {rows, cols}, device());
  Tensor sums = Tensor::Empty({cols}, device());
  ops::ColumnSums(x, sums);
  const std::vector<float> got = sums.ToVector();
  for (int64_t c = 0; c < cols; ++c) {
    float total = 0.f;
    for (int64_t begin = 0; begin < rows; begin += 256) {
      const int64_t end = std::min<int64_t>(begin + 256, rows);
      float chunk = 0.f;
      for (int64_t w = 0; w < 8; ++w) {
        float warp = 0.f;
        for (int64_t r = begin + w; r < end; r += 8) {
          warp += host[static_cast<size_t>(r * cols + c)];
        }
        chunk += warp;
      }
      total += chunk;
    }
    ASSERT_EQ(got[static_cast<size_t>(c)], total) << "column " << c;
  }
}

INSTANTIATE_DEVICE_TEST_SUITE_P(ColumnSumsTest);

}  // namespace
}  // namespace tandem
