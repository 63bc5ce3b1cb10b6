#include "core/op_checks.h"

#include "core/backend.h"
#include "core/check.h"

namespace tandem {
namespace ops {
namespace internal {

// All operands of one op live on one device, and the lane belongs to it.
void CheckOperands(const char* op, const Lane& lane,
                   std::initializer_list<const Tensor*> ts) {
  TANDEM_CHECK(lane.valid()) << op << ": no lane given (a default-constructed Lane)";
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (t == nullptr) continue;
    TANDEM_CHECK(t->defined()) << op << ": an operand is an undefined tensor";
    if (first == nullptr) {
      first = t;
    } else {
      TANDEM_CHECK(t->device() == first->device())
          << op << ": operands on " << first->device() << " and " << t->device();
    }
  }
  if (first != nullptr) {
    TANDEM_CHECK(lane.device() == first->device())
        << op << ": operands on " << first->device() << " but the op was given the "
        << lane.Describe();
  }
}

// "Gemm: a is bfloat16 [64, 784] but b is float32 [512, 784]: they must share a dtype"
void CheckSameDType(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                    const Tensor& b) {
  TANDEM_CHECK(a.dtype() == b.dtype())
      << op << ": " << a_name << " is " << DTypeName(a.dtype()) << " "
      << ShapeToString(a.shape()) << " but " << b_name << " is " << DTypeName(b.dtype())
      << " " << ShapeToString(b.shape()) << ": they must share a dtype";
}

void CheckMatrix(const char* op, const char* name, const Tensor& t) {
  TANDEM_CHECK(t.rank() == 2) << op << ": " << name << " must be 2-D, got shape "
                              << ShapeToString(t.shape());
}

}  // namespace internal
}  // namespace ops
}  // namespace tandem
