// ops::MaskedFill (core/ops_attention.h): checked against the host's
// element-by-element rule for a mask of x's shape and one of its last
// dimensions (a [T, T] mask for every score matrix), in place and not, in
// float32 and bfloat16, and the errors; one test body for CPU and CUDA (CUDA
// cases skip, saying why, where no GPU is visible).
#include <gtest/gtest.h>

#include <cmath>
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
class MaskedFillTest : public DeviceTest {};

TEST_P(MaskedFillTest, FillsWhereTheMaskIsNotZero) {
  Rng rng(3);
  struct Case {
    Shape x, mask;
  };
  for (const Case& c : {Case{{4, 6}, {4, 6}}, Case{{2, 3, 5, 5}, {5, 5}}, Case{{7, 9}, {9}}}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      for (bool in_place : {false, true}) {
        std::vector<float> x(NumElements(c.x)), mask(NumElements(c.mask));
        for (float& v : x) v = RoundToBFloat16(rng.Normal());
        for (float& m : mask) m = rng.Uniform() < 0.4f ? (rng.Uniform() < 0.5f ? 1.f : -2.f) : 0.f;
        Tensor xt = Tensor::FromVector(x, c.x, device(), dtype);
        Tensor out = in_place ? xt : Tensor::Empty(c.x, device(), dtype);
        ops::MaskedFill(xt, Tensor::FromVector(mask, c.mask, device()), -INFINITY, out);
        const std::vector<float> got = out.ToVector();
        for (size_t i = 0; i < x.size(); ++i) {
          const float want = mask[i % mask.size()] != 0.f ? -INFINITY : x[i];
          ASSERT_EQ(got[i], want) << DTypeName(dtype) << " " << ShapeToString(c.x) << " mask "
                                  << ShapeToString(c.mask) << (in_place ? " in place" : "")
                                  << " element " << i;
        }
      }
    }
  }
}

// The fill value is rounded to out's dtype, as storing it would round it.
TEST_P(MaskedFillTest, TheFillIsRoundedToTheDtype) {
  Tensor x = Tensor::Zeros({3}, device(), DType::kBFloat16);
  Tensor out = Tensor::Empty({3}, device(), DType::kBFloat16);
  ops::MaskedFill(x, Tensor::FromVector({1, 0, 1}, {3}, device()), 0.1f, out);
  EXPECT_EQ(out.ToVector(), (std::vector<float>{RoundToBFloat16(0.1f), 0.f, RoundToBFloat16(0.1f)}));
}

using testing::ExpectErrorContains;

TEST_P(MaskedFillTest, BadShapesAndDtypesAreErrorsThatNameThem) {
  Tensor x = Tensor::Zeros({2, 3, 4}, device());
  Tensor out = Tensor::Zeros({2, 3, 4}, device());
  ExpectErrorContains([&] { ops::MaskedFill(x, Tensor::Zeros({3, 5}, device()), 0.f, out); },
                      "MaskedFill: mask [3, 5] is neither x's shape [2, 3, 4] nor its last "
                      "dimensions");
  ExpectErrorContains(
      [&] { ops::MaskedFill(x, Tensor::Zeros({4}, device(), DType::kBFloat16), 0.f, out); },
      "MaskedFill: mask must be float32");
  Tensor small = Tensor::Zeros({2, 3}, device());
  ExpectErrorContains([&] { ops::MaskedFill(x, Tensor::Zeros({4}, device()), 0.f, small); },
                      "MaskedFill: out is [2, 3] but x is [2, 3, 4]");
  ExpectErrorContains([&] { ops::MaskedFill(x, x, 0.f, x); }, "cannot write out in place");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(MaskedFillTest);

}  // namespace
}  // namespace tandem
