// ops::Concat and ops::Split (core/ops_attention.h): copies bit for bit,
// checked against the host's joining along each dimension, in float32 and
// bfloat16; Split undoes Concat; the errors. One test body for CPU and CUDA
// (CUDA cases skip, saying why, where no GPU is visible).
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
class ConcatTest : public DeviceTest {};

// The parts joined along `dim`, on the host.
std::vector<float> Joined(const std::vector<std::vector<float>>& parts,
                          const std::vector<Shape>& shapes, int dim) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= shapes[0][d];
  for (size_t d = dim + 1; d < shapes[0].size(); ++d) inner *= shapes[0][d];
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t p = 0; p < parts.size(); ++p) {
      const int64_t run = shapes[p][dim] * inner;
      out.insert(out.end(), parts[p].begin() + o * run, parts[p].begin() + (o + 1) * run);
    }
  }
  return out;
}

TEST_P(ConcatTest, JoinsAndSplitsAlongEveryDimension) {
  Rng rng(9);
  const Shape base = {3, 4, 5};
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (int dim = 0; dim < 3; ++dim) {
      std::vector<Shape> shapes;
      std::vector<std::vector<float>> parts;
      std::vector<Tensor> xs;
      Shape joined = base;
      joined[dim] = 0;
      for (int64_t size : {2, 1, 3}) {
        Shape s = base;
        s[dim] = size;
        std::vector<float> v(NumElements(s));
        for (float& x : v) x = RoundToBFloat16(rng.Normal());
        shapes.push_back(s);
        parts.push_back(v);
        xs.push_back(Tensor::FromVector(v, s, device(), dtype));
        joined[dim] += size;
      }
      Tensor out = Tensor::Empty(joined, device(), dtype);
      ops::Concat(xs, dim, out);
      EXPECT_EQ(out.ToVector(), Joined(parts, shapes, dim)) << DTypeName(dtype) << " dim " << dim;
      std::vector<Tensor> back;
      for (const Shape& s : shapes) back.push_back(Tensor::Empty(s, device(), dtype));
      ops::Split(out, dim, back);
      for (size_t p = 0; p < back.size(); ++p) {
        EXPECT_EQ(back[p].ToVector(), parts[p]) << DTypeName(dtype) << " dim " << dim << " part " << p;
      }
    }
  }
}

using testing::ExpectErrorContains;

TEST_P(ConcatTest, BadShapesAreErrorsThatNameThem) {
  Tensor a = Tensor::Zeros({2, 3}, device()), b = Tensor::Zeros({2, 4}, device());
  Tensor out = Tensor::Zeros({2, 7}, device());
  ExpectErrorContains([&] { ops::Concat({a, b}, 0, out); },
                      "Concat: x 0 is [2, 3] but out [2, 7] needs its shape but in dimension 0");
  ExpectErrorContains([&] { ops::Concat({a, a}, 1, out); },
                      "Concat: the xs' sizes in dimension 1 sum to 6 but out [2, 7] has 7");
  ExpectErrorContains([&] { ops::Concat({a, b}, 2, out); }, "Concat: dim 2 is not a dimension");
  std::vector<Tensor> parts = {out.Slice(0, 1).Reshape({1, 7}), Tensor::Zeros({1, 7}, device())};
  ExpectErrorContains([&] { ops::Split(out, 1, parts); },
                      "Split: out 0 is [1, 7] but x [2, 7] needs its shape but in dimension 1");
  std::vector<Tensor> overlapping = {out.Slice(0, 1).Reshape({1, 7}),
                                     Tensor::Zeros({1, 7}, device())};
  ExpectErrorContains([&] { ops::Split(out, 0, overlapping); }, "cannot write out in place");
}

INSTANTIATE_DEVICE_TEST_SUITE_P(ConcatTest);

}  // namespace
}  // namespace tandem
