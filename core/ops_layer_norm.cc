#include "core/ops_layer_norm.h"

#include <initializer_list>
#include <utility>

#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"

namespace tandem {
namespace ops {
namespace {

using Named = std::pair<const char*, const Tensor*>;

// Every operand defined and on the lane's device.
void CheckOperands(const char* op, const Lane& lane, std::initializer_list<Named> ts) {
  TANDEM_CHECK(lane.valid()) << op << ": no lane given (a default-constructed Lane)";
  for (const Named& t : ts) {
    TANDEM_CHECK(t.second->defined()) << op << ": " << t.first << " is an undefined tensor";
    TANDEM_CHECK(t.second->device() == lane.device())
        << op << ": " << t.first << " is on " << t.second->device() << " but the op runs on the "
        << lane.Describe();
  }
}

// x is [rows, features] with features > 0.
void CheckInput(const char* op, const Tensor& x) {
  TANDEM_CHECK(x.rank() == 2 && x.dim(1) > 0)
      << op << ": x must be [rows, features] with features > 0, got "
      << ShapeToString(x.shape());
}

// t has x's dtype and `count` elements: one per feature or per row of x.
void CheckVector(const char* op, const char* name, const Tensor& t, int64_t count,
                 const char* per, const Tensor& x) {
  TANDEM_CHECK(t.numel() == count)
      << op << ": " << name << " " << ShapeToString(t.shape()) << " does not match the "
      << count << " " << per << " of x " << ShapeToString(x.shape());
}

void CheckDType(const char* op, const char* name, const Tensor& t, DType dtype,
                const char* why) {
  TANDEM_CHECK(t.dtype() == dtype)
      << op << ": " << name << " is " << DTypeName(t.dtype()) << " "
      << ShapeToString(t.shape()) << ", expected " << DTypeName(dtype) << " (" << why << ")";
}

bool Overlap(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.raw_data());
  const char* pb = static_cast<const char*>(b.raw_data());
  return a.bytes() > 0 && b.bytes() > 0 && pa < pb + b.bytes() && pb < pa + a.bytes();
}

// The output `out` overlaps none of `ins`.
void CheckApart(const char* op, const Named& out, std::initializer_list<Named> ins) {
  for (const Named& in : ins) {
    TANDEM_CHECK(!Overlap(*out.second, *in.second))
        << op << ": " << out.first << " " << ShapeToString(out.second->shape())
        << " overlaps " << in.first << " " << ShapeToString(in.second->shape())
        << "; give it a separate tensor";
  }
}

}  // namespace

void LayerNormForward(const Lane& lane, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "LayerNormForward";
  CheckOperands(op, lane, {{"x", &x}, {"weight", &weight}, {"bias", &bias}, {"y", &y},
                           {"mean", &mean}, {"rstd", &rstd}});
  CheckInput(op, x);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  CheckVector(op, "weight", weight, cols, "features", x);
  CheckVector(op, "bias", bias, cols, "features", x);
  CheckVector(op, "mean", mean, rows, "rows", x);
  CheckVector(op, "rstd", rstd, rows, "rows", x);
  TANDEM_CHECK(y.shape() == x.shape())
      << op << ": y is " << ShapeToString(y.shape()) << " but x is "
      << ShapeToString(x.shape());
  const char* one = "x, weight, bias and y share one dtype";
  CheckDType(op, "weight", weight, x.dtype(), one);
  CheckDType(op, "bias", bias, x.dtype(), one);
  CheckDType(op, "y", y, x.dtype(), one);
  CheckDType(op, "mean", mean, DType::kFloat32, "statistics are float32");
  CheckDType(op, "rstd", rstd, DType::kFloat32, "statistics are float32");
  TANDEM_CHECK(eps >= 0.f) << op << ": eps is " << eps << ", expected >= 0";
  CheckApart(op, {"y", &y}, {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
  CheckApart(op, {"mean", &mean}, {{"x", &x}, {"y", &y}, {"rstd", &rstd}});
  CheckApart(op, {"rstd", &rstd}, {{"x", &x}, {"y", &y}});
  if (rows == 0) return;
  dispatch::LayerNormForward(lane, x.ptr(), weight.ptr(), bias.ptr(), eps, rows, cols,
                             y.mutable_ptr(), mean.mutable_data(), rstd.mutable_data());
}

namespace {

// A float32 [features] gradient of LayerNormBackward, apart from the inputs.
void CheckParamGrad(const char* op, const char* name, const Tensor& g, const Tensor& x,
                    std::initializer_list<Named> ins) {
  CheckVector(op, name, g, x.dim(1), "features", x);
  CheckDType(op, name, g, DType::kFloat32, "gradients are float32");
  CheckApart(op, {name, &g}, ins);
}

}  // namespace

void LayerNormBackward(const Lane& lane, const Tensor& x, const Tensor& dy,
                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                       Tensor* dx, Tensor* dweight, Tensor* dbias) {
  const char* op = "LayerNormBackward";
  CheckOperands(op, lane, {{"x", &x}, {"dy", &dy}, {"weight", &weight}, {"mean", &mean},
                           {"rstd", &rstd}});
  if (dx != nullptr) CheckOperands(op, lane, {{"dx", dx}});
  if (dweight != nullptr) CheckOperands(op, lane, {{"dweight", dweight}});
  if (dbias != nullptr) CheckOperands(op, lane, {{"dbias", dbias}});
  CheckInput(op, x);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  TANDEM_CHECK(dy.shape() == x.shape())
      << op << ": dy is " << ShapeToString(dy.shape()) << " but x is "
      << ShapeToString(x.shape());
  CheckVector(op, "weight", weight, cols, "features", x);
  CheckVector(op, "mean", mean, rows, "rows", x);
  CheckVector(op, "rstd", rstd, rows, "rows", x);
  const char* one = "x, dy, weight and dx share one dtype";
  CheckDType(op, "dy", dy, x.dtype(), one);
  CheckDType(op, "weight", weight, x.dtype(), one);
  CheckDType(op, "mean", mean, DType::kFloat32, "statistics are float32");
  CheckDType(op, "rstd", rstd, DType::kFloat32, "statistics are float32");
  const std::initializer_list<Named> ins = {
      {"x", &x}, {"dy", &dy}, {"weight", &weight}, {"mean", &mean}, {"rstd", &rstd}};
  if (dx != nullptr) {
    TANDEM_CHECK(dx->shape() == x.shape())
        << op << ": dx is " << ShapeToString(dx->shape()) << " but x is "
        << ShapeToString(x.shape());
    CheckDType(op, "dx", *dx, x.dtype(), one);
    CheckApart(op, {"dx", dx}, ins);
  }
  if (dweight != nullptr) CheckParamGrad(op, "dweight", *dweight, x, ins);
  if (dbias != nullptr) {
    CheckParamGrad(op, "dbias", *dbias, x, ins);
    if (dweight != nullptr) CheckApart(op, {"dbias", dbias}, {{"dweight", dweight}});
  }
  if (rows == 0 || (dx == nullptr && dweight == nullptr && dbias == nullptr)) return;
  const Ptr dx_ptr = dx != nullptr ? dx->mutable_ptr() : Ptr{};
  float* dweight_ptr = dweight != nullptr ? dweight->mutable_data() : nullptr;
  float* dbias_ptr = dbias != nullptr ? dbias->mutable_data() : nullptr;
  dispatch::LayerNormBackward(lane, x.ptr(), dy.ptr(), weight.ptr(), mean.data(),
                              rstd.data(), rows, cols, dx_ptr, dweight_ptr, dbias_ptr);
}

}  // namespace ops
}  // namespace tandem
