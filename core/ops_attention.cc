#include "core/ops_attention.h"

#include <cstdint>
#include <utility>

#include "core/check.h"
#include "core/op_checks.h"

namespace tandem {
namespace ops {
namespace {

using internal::CheckOperands;
using internal::CheckSameDType;

// The dimensions before the last two of a tensor of rank >= 2.
Shape BatchDims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// How many matrices a tensor of rank >= 2 holds.
int64_t MatrixCount(const Tensor& t) { return NumElements(BatchDims(t)); }

void CheckMatrices(const char* op, const char* name, const Tensor& t) {
  TANDEM_CHECK(t.rank() >= 2) << op << ": " << name
                              << " must have at least 2 dimensions ([..., rows, cols]), got "
                              << ShapeToString(t.shape());
}

// Whether the bytes of a and b (tensors of one device) overlap.
bool Overlap(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  return a.bytes() > 0 && b.bytes() > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
}

void CheckApart(const char* op, const char* in_name, const Tensor& in, const char* out_name,
                const Tensor& out) {
  TANDEM_CHECK(!Overlap(in, out)) << op << ": " << out_name << " " << ShapeToString(out.shape())
                                  << " overlaps " << in_name << " " << ShapeToString(in.shape())
                                  << "; " << op << " cannot write " << out_name
                                  << " in place: give it a separate tensor";
}

// out is `in` itself (the same elements) or apart from it.
void CheckSameOrApart(const char* op, const char* in_name, const Tensor& in, const char* out_name,
                      const Tensor& out) {
  const bool same = in.raw_data() == out.raw_data() && in.bytes() == out.bytes();
  TANDEM_CHECK(same || !Overlap(in, out))
      << op << ": " << out_name << " " << ShapeToString(out.shape()) << " partly overlaps "
      << in_name << " " << ShapeToString(in.shape()) << "; pass " << in_name << " itself as "
      << out_name << ", or a separate tensor";
}

// An operand of BatchedMatMul has c's batch dimensions or is one matrix;
// returns its batch stride in elements (0: the same matrix for every product).
int64_t BatchStride(const Tensor& t, const char* name, const Tensor& c) {
  if (t.rank() == 2) return 0;
  TANDEM_CHECK(BatchDims(t) == BatchDims(c))
      << "BatchedMatMul: " << name << " " << ShapeToString(t.shape()) << " has batch dimensions "
      << ShapeToString(BatchDims(t)) << " but c " << ShapeToString(c.shape()) << " has "
      << ShapeToString(BatchDims(c)) << ": give " << name
      << " the batch dimensions of c, or one 2-D matrix for every product";
  return t.dim(-1) * t.dim(-2);
}

// x [..., T, T]: returns T.
int64_t CheckScores(const char* op, const char* name, const Tensor& x) {
  CheckMatrices(op, name, x);
  TANDEM_CHECK(x.dim(-1) == x.dim(-2))
      << op << ": " << name << " is " << ShapeToString(x.shape())
      << ", but its last two dimensions must be equal ([..., T, T]: row i sees "
         "columns 0..i)";
  return x.dim(-1);
}

void CheckSameShape(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                    const Tensor& b) {
  TANDEM_CHECK(a.shape() == b.shape()) << op << ": " << b_name << " is " << ShapeToString(b.shape())
                                       << " but " << a_name << " is " << ShapeToString(a.shape());
}

}  // namespace

void BatchedMatMul(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   Tensor& c, const BatchedMatMulOptions& o) {
  const char* op = "BatchedMatMul";
  CheckOperands(op, lane, {&a, &b, &c});
  CheckMatrices(op, "a", a);
  CheckMatrices(op, "b", b);
  CheckMatrices(op, "c", c);
  CheckSameDType(op, "a", a, "b", b);
  TANDEM_CHECK(a.dtype() == DType::kBFloat16 || c.dtype() == DType::kFloat32)
      << op << ": float32 a and b give a float32 result, but c is " << DTypeName(c.dtype()) << " "
      << ShapeToString(c.shape());
  const int64_t m = trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = trans_b ? b.dim(-2) : b.dim(-1);
  TANDEM_CHECK(k == kb) << op << ": op(a) is [..., " << m << ", " << k << "] but op(b) is [..., "
                        << kb << ", " << n << "]: inner dimensions differ (a "
                        << ShapeToString(a.shape()) << (trans_a ? " transposed" : "") << ", b "
                        << ShapeToString(b.shape()) << (trans_b ? " transposed" : "") << ")";
  TANDEM_CHECK(c.dim(-2) == m && c.dim(-1) == n)
      << op << ": c is " << ShapeToString(c.shape()) << ", expected [..., " << m << ", " << n
      << "] (a " << ShapeToString(a.shape()) << (trans_a ? " transposed" : "") << ", b "
      << ShapeToString(b.shape()) << (trans_b ? " transposed" : "") << ")";
  GemmBatch batch;
  batch.count = MatrixCount(c);
  batch.stride_a = BatchStride(a, "a", c);
  batch.stride_b = BatchStride(b, "b", c);
  CheckApart(op, "a", a, "c", c);
  CheckApart(op, "b", b, "c", c);
  if (c.numel() == 0) return;
  lane.backend().BatchedGemm(lane, trans_a, trans_b, m, n, k, o.alpha, a.ptr(), b.ptr(), o.beta,
                             c.mutable_ptr(), batch, o.tf32);
}

void BatchedMatMul(const Lane& lane, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   Tensor& c, float alpha, float beta) {
  BatchedMatMulOptions o;
  o.alpha = alpha;
  o.beta = beta;
  BatchedMatMul(lane, a, trans_a, b, trans_b, c, o);
}

void CausalSoftmax(const Lane& lane, const Tensor& x, float scale, Tensor& out) {
  const char* op = "CausalSoftmax";
  CheckOperands(op, lane, {&x, &out});
  const int64_t t = CheckScores(op, "x", x);
  CheckSameShape(op, "x", x, "out", out);
  CheckSameDType(op, "x", x, "out", out);
  CheckSameOrApart(op, "x", x, "out", out);
  if (x.numel() == 0) return;
  lane.backend().CausalSoftmax(lane, x.ptr(), out.mutable_ptr(), MatrixCount(x), t, scale);
}

void CausalSoftmaxBackward(const Lane& lane, const Tensor& y, const Tensor& dy, float scale,
                           Tensor& dx) {
  const char* op = "CausalSoftmaxBackward";
  CheckOperands(op, lane, {&y, &dy, &dx});
  const int64_t t = CheckScores(op, "y", y);
  CheckSameShape(op, "y", y, "dy", dy);
  CheckSameShape(op, "y", y, "dx", dx);
  CheckSameDType(op, "y", y, "dy", dy);
  CheckSameDType(op, "y", y, "dx", dx);
  CheckSameOrApart(op, "y", y, "dx", dx);
  CheckSameOrApart(op, "dy", dy, "dx", dx);
  if (y.numel() == 0) return;
  lane.backend().CausalSoftmaxBackward(lane, y.ptr(), dy.ptr(), dx.mutable_ptr(), MatrixCount(y), t,
                                       scale);
}

void TransposeLastTwo(const Lane& lane, const Tensor& x, Tensor& out) {
  const char* op = "TransposeLastTwo";
  CheckOperands(op, lane, {&x, &out});
  CheckMatrices(op, "x", x);
  Shape expected = x.shape();
  std::swap(expected[expected.size() - 1], expected[expected.size() - 2]);
  TANDEM_CHECK(out.shape() == expected)
      << op << ": out is " << ShapeToString(out.shape()) << " but x " << ShapeToString(x.shape())
      << " transposes to " << ShapeToString(expected);
  CheckSameDType(op, "x", x, "out", out);
  CheckApart(op, "x", x, "out", out);
  if (x.numel() == 0) return;
  lane.backend().TransposeBatched(lane, x.ptr(), out.mutable_ptr(), MatrixCount(x), x.dim(-2),
                                  x.dim(-1));
}

}  // namespace ops
}  // namespace tandem
