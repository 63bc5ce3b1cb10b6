// The scalar function of each element-wise op (dispatch::Unary, Binary and
// BinaryScalar), shared by the CPU loops and the CUDA kernels as
// core/kernel_math.h is, so both backends compute the same function.
//
//   float y = kernel_math::ApplyUnary(UnaryOp::kRsqrt, 4.f);          // 0.5
//   float q = kernel_math::ApplyBinary(BinaryOp::kDiv, 1.f, 3.f);     // 1 / 3
//
// The division and sqrtf are correctly rounded on both backends (nvcc's
// defaults, -prec-div=true and -prec-sqrt=true, and IEEE on the CPU), so
// add, subtract, multiply, divide, sqrt, rsqrt (1 / sqrt(x), two roundings)
// and reciprocal give the same bits on CPU and GPU. expf and logf are each
// platform's own and may differ in the last place or two.
#ifndef TANDEM_CORE_ELEMENTWISE_MATH_H_
#define TANDEM_CORE_ELEMENTWISE_MATH_H_

#include <cmath>

#include "core/backend.h"
#include "core/host_device.h"

namespace tandem {
namespace kernel_math {

TANDEM_HOST_DEVICE float ApplyUnary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kRsqrt: return 1.f / sqrtf(x);
    case UnaryOp::kReciprocal: default: return 1.f / x;
  }
}

TANDEM_HOST_DEVICE float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: default: return a / b;
  }
}

// The larger of a and b, or NaN if either is NaN (so a row's maximum shows
// a NaN in the row, as torch.max does); -inf is its identity.
TANDEM_HOST_DEVICE float MaxOrNan(float a, float b) {
  return (a > b || a != a) ? a : b;
}

}  // namespace kernel_math
}  // namespace tandem

#endif  // TANDEM_CORE_ELEMENTWISE_MATH_H_
