// ops::Permute (core/ops_attention.h): a copy bit for bit, checked against
// an element-by-element reordering on the host, for orders that merge
// dimensions and orders that move every one, with dimensions of size 1, in
// float32 and bfloat16; one test body for CPU and CUDA (CUDA cases skip,
// saying why, where no GPU is visible).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
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
class PermuteTest : public DeviceTest {};

// numpy's transpose(x, dims), one element at a time.
std::vector<float> Reordered(const std::vector<float>& x, const Shape& shape,
                             const std::vector<int>& dims) {
  const size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  Shape out_shape(rank);
  for (size_t i = 0; i < rank; ++i) out_shape[i] = shape[dims[i]];
  std::vector<float> out(x.size());
  for (int64_t e = 0; e < static_cast<int64_t>(x.size()); ++e) {
    int64_t rest = e, from = 0;
    for (size_t i = rank; i-- > 0;) {
      from += (rest % out_shape[i]) * stride[dims[i]];
      rest /= out_shape[i];
    }
    out[e] = x[from];
  }
  return out;
}

struct Case {
  Shape shape;
  std::vector<int> dims;
};

TEST_P(PermuteTest, MatchesTheHostReordering) {
  Rng rng(11);
  const std::vector<Case> cases = {
      {{5, 7}, {1, 0}},                        // a transpose
      {{3, 4, 5}, {0, 1, 2}},                  // the identity: one run
      {{6, 3, 4, 8}, {0, 2, 1, 3}},            // attention's merge: runs of 8
      {{2, 5, 3, 4, 6}, {2, 3, 0, 1, 4}},      // attention's split of [B, T, 3, H, hs]
      {{2, 3, 4, 5}, {3, 2, 1, 0}},            // every dimension moves
      {{4, 1, 3, 1, 5}, {4, 1, 0, 3, 2}},      // dimensions of size 1
      {{2, 3, 2, 3, 2, 3}, {5, 3, 1, 4, 2, 0}},  // six that move apart
      {{70, 33, 3}, {1, 0, 2}},                // not a multiple of any tile
  };
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (const Case& c : cases) {
      std::vector<float> x(NumElements(c.shape));
      for (float& v : x) v = RoundToBFloat16(rng.Normal());
      Shape out_shape(c.shape.size());
      for (size_t i = 0; i < c.dims.size(); ++i) out_shape[i] = c.shape[c.dims[i]];
      Tensor out = Tensor::Empty(out_shape, device(), dtype);
      ops::Permute(Tensor::FromVector(x, c.shape, device(), dtype), c.dims, out);
      EXPECT_EQ(out.ToVector(), Reordered(x, c.shape, c.dims))
          << DTypeName(dtype) << " " << ShapeToString(c.shape);
    }
  }
}

// Reordering back with the inverse order gives x again.
TEST_P(PermuteTest, TheInverseOrderUndoesIt) {
  Rng rng(12);
  const Shape shape = {3, 7, 2, 5};
  const std::vector<int> dims = {2, 0, 3, 1}, inverse = {1, 3, 0, 2};
  std::vector<float> x(NumElements(shape));
  for (float& v : x) v = rng.Normal();
  Tensor there = Tensor::Empty({2, 3, 5, 7}, device());
  ops::Permute(Tensor::FromVector(x, shape, device()), dims, there);
  Tensor back = Tensor::Empty(shape, device());
  ops::Permute(there, inverse, back);
  EXPECT_EQ(back.ToVector(), x);
}

using testing::ExpectErrorContains;

TEST_P(PermuteTest, BadOrdersAndShapesAreErrorsThatNameThem) {
  Tensor x = Tensor::Zeros({2, 3, 4}, device());
  Tensor out = Tensor::Zeros({4, 3, 2}, device());
  ExpectErrorContains([&] { ops::Permute(x, {0, 0, 1}, out); },
                      "Permute: dims [0, 0, 1] are not an order of x's 3 dimensions");
  ExpectErrorContains([&] { ops::Permute(x, {0, 1}, out); },
                      "Permute: dims [0, 1] are not an order of x's 3 dimensions");
  ExpectErrorContains([&] { ops::Permute(x, {1, 0, 2}, out); },
                      "Permute: out is [4, 3, 2] but x [2, 3, 4] reordered is [3, 2, 4]");
  Tensor same = Tensor::Zeros({2, 3, 4}, device());
  ExpectErrorContains([&] { ops::Permute(same, {0, 1, 2}, same); }, "cannot write out in place");
  Tensor seven = Tensor::Zeros({2, 2, 2, 2, 2, 2, 2}, device());
  Tensor seven_out = Tensor::Zeros({2, 2, 2, 2, 2, 2, 2}, device());
  ExpectErrorContains([&] { ops::Permute(seven, {6, 5, 4, 3, 2, 1, 0}, seven_out); },
                      "leaves 7 dimensions that move apart; at most 6 can");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(PermuteTest);

}  // namespace
}  // namespace tandem
