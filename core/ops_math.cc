#include "core/ops_math.h"

#include <cstdint>
#include <initializer_list>

#include "core/check.h"
#include "core/dispatch.h"
#include "core/op_checks.h"

namespace tandem {
namespace ops {
namespace {

using internal::CheckMatrix;
using internal::CheckOperands;
using internal::CheckSameDType;

// Float32 indices name rows exactly up to 2^24.
constexpr int64_t kMaxIndexedRows = int64_t{1} << 24;

void CheckSameNumel(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                    const Tensor& b) {
  TANDEM_CHECK(a.numel() == b.numel())
      << op << ": " << a_name << " " << ShapeToString(a.shape()) << " and " << b_name << " "
      << ShapeToString(b.shape()) << " differ in size";
}


// Whether the bytes of a and b (tensors of one device) overlap.
bool Overlap(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  return a.bytes() > 0 && b.bytes() > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
}

// out may be `in` itself (the same elements) or apart from it, not partly
// over it: an element-wise op reads each element before it writes it.
void CheckSameOrApart(const char* op, const char* in_name, const Tensor& in,
                      const Tensor& out) {
  const bool same = in.raw_data() == out.raw_data() && in.bytes() == out.bytes();
  TANDEM_CHECK(same || !Overlap(in, out))
      << op << ": out " << ShapeToString(out.shape()) << " partly overlaps " << in_name << " "
      << ShapeToString(in.shape()) << "; pass " << in_name
      << " itself as out, or a separate tensor";
}

void CheckApart(const char* op, const char* in_name, const Tensor& in, const char* out_name,
                const Tensor& out) {
  TANDEM_CHECK(!Overlap(in, out))
      << op << ": " << out_name << " " << ShapeToString(out.shape()) << " overlaps "
      << in_name << " " << ShapeToString(in.shape()) << "; " << op << " cannot write "
      << out_name << " in place: give it a separate tensor";
}

// Indices of rows of a [table_rows, cols] table: float32, one per row of
// `rows` ([n, cols]), within what float32 names exactly.
void CheckIndices(const char* op, const Tensor& table, const Tensor& indices,
                  const char* rows_name, const Tensor& rows) {
  CheckMatrix(op, "table", table);
  CheckMatrix(op, rows_name, rows);
  TANDEM_CHECK(indices.dtype() == DType::kFloat32)
      << op << ": indices are " << DTypeName(indices.dtype()) << " "
      << ShapeToString(indices.shape())
      << ", expected float32 (whole numbers, exact up to 2^24)";
  TANDEM_CHECK(indices.numel() == rows.dim(0))
      << op << ": " << indices.numel() << " indices " << ShapeToString(indices.shape())
      << " for " << rows.dim(0) << " rows of " << rows_name << " "
      << ShapeToString(rows.shape());
  TANDEM_CHECK(rows.dim(1) == table.dim(1))
      << op << ": " << rows_name << " " << ShapeToString(rows.shape()) << " has "
      << rows.dim(1) << " columns but table " << ShapeToString(table.shape()) << " has "
      << table.dim(1);
  TANDEM_CHECK(table.dim(0) <= kMaxIndexedRows)
      << op << ": table " << ShapeToString(table.shape())
      << " has more rows than float32 indices name exactly (2^24 = " << kMaxIndexedRows << ")";
}

void UnaryChecked(const Lane& lane, const char* name, UnaryOp op, const Tensor& x,
                  Tensor& out) {
  CheckOperands(name, lane, {&x, &out});
  CheckSameNumel(name, "x", x, "out", out);
  CheckSameDType(name, "x", x, "out", out);
  CheckSameOrApart(name, "x", x, out);
  if (x.numel() == 0) return;
  dispatch::Unary(lane, op, x.ptr(), out.mutable_ptr(), x.numel());
}

void ScalarChecked(const Lane& lane, const char* name, BinaryOp op, const Tensor& x,
                   float s, Tensor& out) {
  CheckOperands(name, lane, {&x, &out});
  CheckSameNumel(name, "x", x, "out", out);
  CheckSameDType(name, "x", x, "out", out);
  CheckSameOrApart(name, "x", x, out);
  if (x.numel() == 0) return;
  dispatch::BinaryScalar(lane, op, x.ptr(), s, out.mutable_ptr(), x.numel());
}

void BroadcastChecked(const Lane& lane, const char* name, BinaryOp op, const Tensor& x,
                      const Tensor& v, Broadcast how, Tensor& out) {
  CheckOperands(name, lane, {&x, &v, &out});
  CheckMatrix(name, "x", x);
  const bool row = how == Broadcast::kRow;
  const int64_t expected = row ? x.dim(1) : x.dim(0);
  TANDEM_CHECK(v.numel() == expected)
      << name << ": v " << ShapeToString(v.shape()) << " does not match the " << expected
      << (row ? " columns" : " rows") << " of x " << ShapeToString(x.shape())
      << (row ? " (Broadcast::kRow: v is [cols])" : " (Broadcast::kColumn: v is [rows])");
  TANDEM_CHECK(out.shape() == x.shape())
      << name << ": out is " << ShapeToString(out.shape()) << " but x is "
      << ShapeToString(x.shape());
  CheckSameDType(name, "x", x, "v", v);
  CheckSameDType(name, "x", x, "out", out);
  CheckSameOrApart(name, "x", x, out);
  CheckApart(name, "v", v, "out", out);
  if (x.numel() == 0) return;
  dispatch::BroadcastBinary(lane, op, how, x.ptr(), v.ptr(), out.mutable_ptr(), x.dim(0),
                            x.dim(1));
}

void RowReduceChecked(const Lane& lane, const char* name, RowReduction op, const Tensor& x,
                      Tensor& out) {
  CheckOperands(name, lane, {&x, &out});
  CheckMatrix(name, "x", x);
  TANDEM_CHECK(out.numel() == x.dim(0))
      << name << ": out " << ShapeToString(out.shape()) << " for the " << x.dim(0)
      << " rows of x " << ShapeToString(x.shape());
  CheckApart(name, "x", x, "out", out);
  if (x.dim(0) == 0) return;
  if (x.dim(1) == 0) {
    TANDEM_CHECK(op == RowReduction::kSum)
        << name << " of rows with no columns: x is " << ShapeToString(x.shape());
    dispatch::Fill(lane, 0.f, out.mutable_ptr(), out.numel());
    return;
  }
  dispatch::RowReduce(lane, op, x.ptr(), x.dim(0), x.dim(1), out.mutable_ptr());
}

}  // namespace

void Exp(const Lane& lane, const Tensor& x, Tensor& out) {
  UnaryChecked(lane, "Exp", UnaryOp::kExp, x, out);
}
void Log(const Lane& lane, const Tensor& x, Tensor& out) {
  UnaryChecked(lane, "Log", UnaryOp::kLog, x, out);
}
void Sqrt(const Lane& lane, const Tensor& x, Tensor& out) {
  UnaryChecked(lane, "Sqrt", UnaryOp::kSqrt, x, out);
}
void Rsqrt(const Lane& lane, const Tensor& x, Tensor& out) {
  UnaryChecked(lane, "Rsqrt", UnaryOp::kRsqrt, x, out);
}
void Reciprocal(const Lane& lane, const Tensor& x, Tensor& out) {
  UnaryChecked(lane, "Reciprocal", UnaryOp::kReciprocal, x, out);
}

void Div(const Lane& lane, const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "Div";
  CheckOperands(op, lane, {&a, &b, &out});
  CheckSameNumel(op, "a", a, "b", b);
  CheckSameNumel(op, "a", a, "out", out);
  CheckSameDType(op, "a", a, "b", b);
  CheckSameDType(op, "a", a, "out", out);
  CheckSameOrApart(op, "a", a, out);
  CheckSameOrApart(op, "b", b, out);
  if (a.numel() == 0) return;
  dispatch::Binary(lane, BinaryOp::kDiv, a.ptr(), b.ptr(), out.mutable_ptr(), a.numel());
}

void AddScalar(const Lane& lane, const Tensor& x, float s, Tensor& out) {
  ScalarChecked(lane, "AddScalar", BinaryOp::kAdd, x, s, out);
}
void MulScalar(const Lane& lane, const Tensor& x, float s, Tensor& out) {
  ScalarChecked(lane, "MulScalar", BinaryOp::kMul, x, s, out);
}

void BroadcastAdd(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out) {
  BroadcastChecked(lane, "BroadcastAdd", BinaryOp::kAdd, x, v, how, out);
}
void BroadcastSub(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out) {
  BroadcastChecked(lane, "BroadcastSub", BinaryOp::kSub, x, v, how, out);
}
void BroadcastMul(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out) {
  BroadcastChecked(lane, "BroadcastMul", BinaryOp::kMul, x, v, how, out);
}
void BroadcastDiv(const Lane& lane, const Tensor& x, const Tensor& v, Broadcast how,
                  Tensor& out) {
  BroadcastChecked(lane, "BroadcastDiv", BinaryOp::kDiv, x, v, how, out);
}

void RowSum(const Lane& lane, const Tensor& x, Tensor& out) {
  RowReduceChecked(lane, "RowSum", RowReduction::kSum, x, out);
}
void RowMean(const Lane& lane, const Tensor& x, Tensor& out) {
  RowReduceChecked(lane, "RowMean", RowReduction::kMean, x, out);
}
void RowMax(const Lane& lane, const Tensor& x, Tensor& out) {
  RowReduceChecked(lane, "RowMax", RowReduction::kMax, x, out);
}
void RowVariance(const Lane& lane, const Tensor& x, Tensor& out) {
  RowReduceChecked(lane, "RowVariance", RowReduction::kVariance, x, out);
}

void Softmax(const Lane& lane, const Tensor& x, Tensor& out) {
  const char* op = "Softmax";
  CheckOperands(op, lane, {&x, &out});
  CheckMatrix(op, "x", x);
  TANDEM_CHECK(out.shape() == x.shape())
      << op << ": out is " << ShapeToString(out.shape()) << " but x is "
      << ShapeToString(x.shape());
  CheckSameDType(op, "x", x, "out", out);
  CheckSameOrApart(op, "x", x, out);
  if (x.dim(0) == 0) return;
  TANDEM_CHECK(x.dim(1) > 0) << op << " of rows with no columns: x is "
                             << ShapeToString(x.shape());
  dispatch::Softmax(lane, x.ptr(), out.mutable_ptr(), x.dim(0), x.dim(1));
}

void Transpose(const Lane& lane, const Tensor& x, Tensor& out) {
  const char* op = "Transpose";
  CheckOperands(op, lane, {&x, &out});
  CheckMatrix(op, "x", x);
  CheckMatrix(op, "out", out);
  TANDEM_CHECK(out.dim(0) == x.dim(1) && out.dim(1) == x.dim(0))
      << op << ": out is " << ShapeToString(out.shape()) << " but x "
      << ShapeToString(x.shape()) << " transposes to [" << x.dim(1) << ", " << x.dim(0)
      << "]";
  CheckSameDType(op, "x", x, "out", out);
  CheckApart(op, "x", x, "out", out);
  if (x.numel() == 0) return;
  dispatch::Transpose(lane, x.ptr(), out.mutable_ptr(), x.dim(0), x.dim(1));
}

void GatherRows(const Lane& lane, const Tensor& table, const Tensor& indices, Tensor& out) {
  const char* op = "GatherRows";
  CheckOperands(op, lane, {&table, &indices, &out});
  CheckIndices(op, table, indices, "out", out);
  CheckSameDType(op, "table", table, "out", out);
  CheckApart(op, "table", table, "out", out);
  CheckApart(op, "indices", indices, "out", out);
  if (out.numel() == 0) return;
  dispatch::GatherRows(lane, table.ptr(), table.dim(0), indices.data(), out.dim(0),
                       out.dim(1), out.mutable_ptr());
}

void ScatterAddRows(const Lane& lane, const Tensor& src, const Tensor& indices,
                    Tensor& table) {
  const char* op = "ScatterAddRows";
  CheckOperands(op, lane, {&src, &indices, &table});
  CheckIndices(op, table, indices, "src", src);
  CheckApart(op, "src", src, "table", table);
  CheckApart(op, "indices", indices, "table", table);
  if (src.numel() == 0) return;
  dispatch::ScatterAddRows(lane, src.ptr(), indices.data(), src.dim(0), src.dim(1),
                           table.mutable_ptr(), table.dim(0));
}

}  // namespace ops
}  // namespace tandem
