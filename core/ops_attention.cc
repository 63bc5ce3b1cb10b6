#include "core/ops_attention.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/dispatch.h"
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
  dispatch::BatchedGemm(lane, trans_a, trans_b, m, n, k, o.alpha, a.ptr(), b.ptr(), o.beta,
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
  dispatch::CausalSoftmax(lane, x.ptr(), out.mutable_ptr(), MatrixCount(x), t, scale);
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
  dispatch::CausalSoftmaxBackward(lane, y.ptr(), dy.ptr(), dx.mutable_ptr(), MatrixCount(y), t,
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
  dispatch::TransposeBatched(lane, x.ptr(), out.mutable_ptr(), MatrixCount(x), x.dim(-2),
                             x.dim(-1));
}

namespace {

// The reordering as the backend gets it: dimensions of size 1 dropped, and
// each run of dimensions that stay adjacent and in order merged into one.
PermuteSpec MergedSpec(const Shape& shape, const std::vector<int>& dims) {
  struct Group {
    int first;     // x's dimension it starts at
    int64_t size;  // its dimensions' product
  };
  std::vector<Group> groups;  // in out's order
  int previous = -2;
  for (int d : dims) {
    if (shape[d] == 1) continue;
    if (d == previous + 1 && !groups.empty()) {
      groups.back().size *= shape[d];
    } else {
      groups.push_back({d, shape[d]});
    }
    previous = d;
  }
  if (groups.empty()) groups.push_back({0, 1});  // one element
  TANDEM_CHECK(static_cast<int>(groups.size()) <= PermuteSpec::kMaxRank)
      << "Permute: x " << ShapeToString(shape) << " reordered by its dims leaves "
      << groups.size() << " dimensions that move apart; at most " << PermuteSpec::kMaxRank
      << " can";
  // x's merged dimensions in x's order, and where each of out's lies there.
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  PermuteSpec spec;
  spec.rank = static_cast<int>(groups.size());
  for (size_t position = 0; position < order.size(); ++position) {
    spec.in_shape[position] = groups[order[position]].size;
    spec.perm[order[position]] = static_cast<int>(position);
  }
  return spec;
}

}  // namespace

void Permute(const Lane& lane, const Tensor& x, const std::vector<int>& dims, Tensor& out) {
  const char* op = "Permute";
  CheckOperands(op, lane, {&x, &out});
  std::vector<bool> seen(x.rank(), false);
  bool valid = static_cast<int>(dims.size()) == x.rank();
  for (int d : dims) {
    valid = valid && d >= 0 && d < x.rank() && !seen[d];
    if (valid) seen[d] = true;
  }
  if (!valid) {
    std::string listed;
    for (int d : dims) listed += (listed.empty() ? "" : ", ") + std::to_string(d);
    TANDEM_CHECK(false) << op << ": dims [" << listed << "] are not an order of x's "
                        << x.rank() << " dimensions (each of 0.." << x.rank() - 1
                        << " once); x is " << ShapeToString(x.shape());
  }
  Shape expected(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) expected[i] = x.dim(dims[i]);
  TANDEM_CHECK(out.shape() == expected)
      << op << ": out is " << ShapeToString(out.shape()) << " but x " << ShapeToString(x.shape())
      << " reordered is " << ShapeToString(expected);
  CheckSameDType(op, "x", x, "out", out);
  CheckApart(op, "x", x, "out", out);
  if (x.numel() == 0) return;
  dispatch::Permute(lane, x.ptr(), out.mutable_ptr(), MergedSpec(x.shape(), dims));
}

void MaskedFill(const Lane& lane, const Tensor& x, const Tensor& mask, float fill, Tensor& out) {
  const char* op = "MaskedFill";
  CheckOperands(op, lane, {&x, &mask, &out});
  TANDEM_CHECK(out.shape() == x.shape())
      << op << ": out is " << ShapeToString(out.shape()) << " but x is " << ShapeToString(x.shape());
  CheckSameDType(op, "x", x, "out", out);
  TANDEM_CHECK(mask.dtype() == DType::kFloat32)
      << op << ": mask must be float32 (0 keeps x, anything else fills), got "
      << DTypeName(mask.dtype());
  const Shape& xs = x.shape();
  const Shape& ms = mask.shape();
  TANDEM_CHECK(ms.size() <= xs.size() && std::equal(ms.begin(), ms.end(), xs.end() - ms.size()))
      << op << ": mask " << ShapeToString(ms) << " is neither x's shape " << ShapeToString(xs)
      << " nor its last dimensions";
  CheckApart(op, "mask", mask, "out", out);
  CheckSameOrApart(op, "x", x, "out", out);
  if (x.numel() == 0) return;
  dispatch::MaskedFill(lane, x.ptr(), mask.data(), x.numel(), mask.numel(), fill,
                       out.mutable_ptr());
}

namespace {

// The tensor along `dim` as [outer, size(dim) * inner] rows: out's
// dimensions before dim, and the bytes of one row.
struct Rows {
  int64_t outer = 1;
  int64_t inner_bytes = 0;  // of one index along dim and everything after
};

Rows RowsAlong(const Tensor& t, int dim) {
  Rows r;
  for (int d = 0; d < dim; ++d) r.outer *= t.dim(d);
  int64_t inner = 1;
  for (int d = dim + 1; d < t.rank(); ++d) inner *= t.dim(d);
  r.inner_bytes = inner * static_cast<int64_t>(SizeOf(t.dtype()));
  return r;
}

// Checks that `parts` join into `whole` along dim (naming `op`, and the
// parts as `part_name`s).
void CheckJoin(const char* op, const Lane& lane, const std::vector<Tensor>& parts,
               const char* part_name, int dim, const Tensor& whole, const char* whole_name) {
  TANDEM_CHECK(!parts.empty()) << op << ": no " << part_name << "s given";
  TANDEM_CHECK(dim >= 0 && dim < whole.rank())
      << op << ": dim " << dim << " is not a dimension of " << whole_name << " "
      << ShapeToString(whole.shape());
  int64_t sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    CheckOperands(op, lane, {&p, &whole});
    Shape expected = whole.shape();
    expected[dim] = p.rank() == whole.rank() ? p.dim(dim) : 0;
    TANDEM_CHECK(p.rank() == whole.rank() && p.shape() == expected)
        << op << ": " << part_name << " " << i << " is " << ShapeToString(p.shape()) << " but "
        << whole_name << " " << ShapeToString(whole.shape()) << " needs its shape but in dimension "
        << dim;
    CheckSameDType(op, part_name, p, whole_name, whole);
    sum += p.dim(dim);
  }
  TANDEM_CHECK(sum == whole.dim(dim))
      << op << ": the " << part_name << "s' sizes in dimension " << dim << " sum to " << sum
      << " but " << whole_name << " " << ShapeToString(whole.shape()) << " has " << whole.dim(dim);
}

}  // namespace

void Concat(const Lane& lane, const std::vector<Tensor>& xs, int dim, Tensor& out) {
  CheckJoin("Concat", lane, xs, "x", dim, out, "out");
  for (const Tensor& x : xs) CheckApart("Concat", "x", x, "out", out);
  const Rows whole = RowsAlong(out, dim);
  char* dst = static_cast<char*>(out.mutable_ptr().data);
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    const int64_t row_bytes = x.dim(dim) * whole.inner_bytes;
    lane.backend().CopyRows(lane, x.ptr().data, row_bytes, dst + offset,
                            out.dim(dim) * whole.inner_bytes, row_bytes,
                            x.numel() == 0 ? 0 : whole.outer);
    offset += row_bytes;
  }
}

void Split(const Lane& lane, const Tensor& x, int dim, std::vector<Tensor>& outs) {
  CheckJoin("Split", lane, outs, "out", dim, x, "x");
  for (const Tensor& out : outs) CheckApart("Split", "x", x, "out", out);
  const Rows whole = RowsAlong(x, dim);
  const char* src = static_cast<const char*>(x.ptr().data);
  int64_t offset = 0;
  for (Tensor& out : outs) {
    const int64_t row_bytes = out.dim(dim) * whole.inner_bytes;
    lane.backend().CopyRows(lane, src + offset, x.dim(dim) * whole.inner_bytes,
                            out.mutable_ptr().data, row_bytes, row_bytes,
                            out.numel() == 0 ? 0 : whole.outer);
    offset += row_bytes;
  }
}

}  // namespace ops
}  // namespace tandem
