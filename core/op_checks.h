// The operand checks every op family shares (core/ops.cc, core/ops_math.cc):
// one device and lane, matching dtypes, 2-D operands. Errors name the op.
// Internal to core/.
#ifndef TANDEM_CORE_OP_CHECKS_H_
#define TANDEM_CORE_OP_CHECKS_H_

#include <initializer_list>

#include "core/lane.h"
#include "core/tensor.h"

namespace tandem {
namespace ops {
namespace internal {

// All (non-null) operands of one op are defined and live on one device, and
// the lane belongs to it.
void CheckOperands(const char* op, const Lane& lane, std::initializer_list<const Tensor*> ts);
// "Gemm: a is bfloat16 [64, 784] but b is float32 [512, 784]: they must share a dtype"
void CheckSameDType(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                    const Tensor& b);
void CheckMatrix(const char* op, const char* name, const Tensor& t);

}  // namespace internal
}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_CORE_OP_CHECKS_H_
