// The dispatcher of the op table (core/op_table.h): dispatch::<Name>(lane,
// args...) for every op of the table checks the operands against the op's
// rules and runs the kernel of the lane's device. The public wrappers
// (core/ops*.h) call it after their shape checks; OpTable() lists the ops.
//
//   dispatch::Fill(lane, 0.f, t.mutable_ptr(), t.numel());
#ifndef TANDEM_CORE_DISPATCH_H_
#define TANDEM_CORE_DISPATCH_H_

#include <atomic>
#include <vector>

#include "core/op_table.h"

namespace tandem {

namespace op_table_internal {

// One operand as the rules see it.
struct Operand {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  bool written = false;
};
inline Operand OperandOf(CPtr p) { return {p.data, p.dtype, false}; }
inline Operand OperandOf(Ptr p) { return {p.data, p.dtype, true}; }
template <typename T>
Operand OperandOf(const T&) {
  return {};
}

// Throws, naming the op and the operand, where `operands` break the op's
// rules or the lane's device has no kernel for it (`kernel` null).
void CheckCall(const OpInfo& info, const Lane& lane, const Operand* operands, int count,
               bool has_kernel);

// Called with each dispatched op and its device while set (tests count
// which ops ran where); null by default.
using CallObserver = void (*)(const OpInfo& info, Device device);
extern std::atomic<CallObserver> call_observer;

}  // namespace op_table_internal

// An op of the table: its rules and its kernel on each kind of device.
template <typename Signature>
class Op;

template <typename... Args>
class Op<void(Args...)> {
 public:
  using Kernel = void (*)(const Lane&, Args...);

  constexpr Op(const OpInfo& info, Kernel cpu, Kernel cuda)
      : info_(info), cpu_(cpu), cuda_(cuda) {}

  const OpInfo& info() const { return info_; }

  // Checks the operands against the op's rules, then runs the kernel of the
  // lane's device on it.
  void operator()(const Lane& lane, Args... args) const {
    const Device device = lane.device();
    const Kernel kernel = device.is_cuda() ? cuda_ : cpu_;
    const op_table_internal::Operand operands[] = {op_table_internal::OperandOf(args)...,
                                                   op_table_internal::Operand{}};
    op_table_internal::CheckCall(info_, lane, operands, sizeof...(Args), kernel != nullptr);
    if (auto observe = op_table_internal::call_observer.load(std::memory_order_relaxed)) {
      observe(info_, device);
    }
    kernel(lane, args...);
  }

 private:
  OpInfo info_;
  Kernel cpu_;
  Kernel cuda_;
};

// dispatch::Gemm, dispatch::Unary, ...: one per line of the table.
namespace dispatch {
#define TANDEM_DECLARE_OP(name, dtypes, aliasing, params) extern const Op<void params> name;
TANDEM_BACKEND_OPS(TANDEM_DECLARE_OP)
#undef TANDEM_DECLARE_OP
}  // namespace dispatch

// Every op of the table, in its order.
const std::vector<const OpInfo*>& OpTable();

}  // namespace tandem

#endif  // TANDEM_CORE_DISPATCH_H_
