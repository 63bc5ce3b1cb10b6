// ops::TransposeLastTwo (core/ops_attention.h): a copy bit for bit, checked
// against the host's transposition, one test body for CPU and CUDA (CUDA
// cases skip, saying why, where no GPU is visible).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class TransposeLastTwoTest : public DeviceTest {};

// x [..., rows, cols] with each matrix transposed, on the host.
std::vector<float> Transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> out(x.size());
  const int64_t size = rows * cols;
  for (int64_t b = 0; b < static_cast<int64_t>(x.size()) / size; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) out[b * size + c * rows + r] = x[b * size + r * cols + c];
    }
  }
  return out;
}

TEST_P(TransposeLastTwoTest, TransposesEveryMatrix) {
  Rng rng(5);
  // Sizes that are not multiples of a 32-wide tile, and a 2-D tensor.
  const std::vector<Shape> shapes = {{2, 3, 5, 7}, {3, 70, 45}, {1, 1}, {4, 1, 33}, {33, 64}};
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const Shape& shape : shapes) {
      std::vector<float> x(NumElements(shape));
      for (float& v : x) v = RoundToBFloat16(rng.Normal());
      Shape out_shape = shape;
      std::swap(out_shape[shape.size() - 1], out_shape[shape.size() - 2]);
      Tensor out = Tensor::Empty(out_shape, device(), dtype);
      ops::TransposeLastTwo(Tensor::FromVector(x, shape, device(), dtype), out);
      EXPECT_EQ(out.ToVector(), Transposed(x, shape[shape.size() - 2], shape.back()))
          << DTypeName(dtype) << " " << ShapeToString(shape);
    }
  }
}

using testing::ExpectErrorContains;

TEST_P(TransposeLastTwoTest, BadShapesAreErrorsThatNameThem) {
  Tensor x = Tensor::Zeros({2, 3, 4}, device());
  Tensor same = Tensor::Zeros({2, 3, 4}, device());
  ExpectErrorContains([&] { ops::TransposeLastTwo(x, same); },
                      "TransposeLastTwo: out is [2, 3, 4] but x [2, 3, 4] transposes to "
                      "[2, 4, 3]");
  Tensor v = Tensor::Zeros({4}, device());
  ExpectErrorContains([&] { ops::TransposeLastTwo(v, v); },
                      "TransposeLastTwo: x must have at least 2 dimensions");
  Tensor square = Tensor::Zeros({2, 3, 3}, device());
  ExpectErrorContains([&] { ops::TransposeLastTwo(square, square); }, "cannot write out in place");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(TransposeLastTwoTest);

}  // namespace
}  // namespace tandem
