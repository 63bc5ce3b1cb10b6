#include "core/dispatch.h"

#include "core/check.h"

namespace tandem {
namespace op_table_internal {

std::atomic<CallObserver> call_observer{nullptr};

void CheckCall(const OpInfo& info, const Lane& lane, const Operand* operands, int count,
               bool has_kernel) {
  TANDEM_CHECK(has_kernel) << info.name << " has no kernel for " << lane.device()
                           << " in this build";
  // Nothing to check for an op whose operands may each have either dtype
  // and be any of each other (Gemm, the activations, ...).
  if (info.dtypes == OpDTypes::kEach && info.aliasing == OpAliasing::kAnyInput) return;
  const Operand* first = nullptr;        // the first operand with memory
  const Operand* first_read = nullptr;   // the first read one
  for (int i = 0; i < count; ++i) {
    const Operand& o = operands[i];
    if (o.data == nullptr) continue;
    if (first == nullptr) first = &o;
    if (!o.written && first_read == nullptr) first_read = &o;
    if (info.dtypes == OpDTypes::kSame) {
      TANDEM_CHECK(o.dtype == first->dtype)
          << info.name << ": argument " << i + 1 << " is " << DTypeName(o.dtype)
          << " but an earlier operand is " << DTypeName(first->dtype)
          << ": this op's operands share one dtype";
    }
  }
  for (int w = 0; w < count; ++w) {
    if (!operands[w].written || operands[w].data == nullptr) continue;
    for (int r = 0; r < count; ++r) {
      const Operand& read = operands[r];
      if (read.written || read.data != operands[w].data) continue;
      const bool allowed = info.aliasing == OpAliasing::kAnyInput ||
                           (info.aliasing == OpAliasing::kFirstInput && &read == first_read);
      TANDEM_CHECK(allowed) << info.name << ": argument " << w + 1
                            << " (written) is the memory of argument " << r + 1
                            << " (read), which this op does not allow"
                            << (info.aliasing == OpAliasing::kFirstInput
                                    ? " (only its first read operand may be written in place)"
                                    : " (it writes apart from what it reads)");
    }
  }
}

}  // namespace op_table_internal

#ifdef TANDEM_WITH_CUDA
#define TANDEM_CUDA_OP_KERNEL(name) &cuda::op_kernels::name
#else
#define TANDEM_CUDA_OP_KERNEL(name) nullptr  // no CUDA device exists to run one
#endif

namespace dispatch {
#define TANDEM_DEFINE_OP(name, dtypes, aliasing, params)                             \
  const Op<void params> name(OpInfo{#name, OpDTypes::dtypes, OpAliasing::aliasing}, \
                             &cpu::op_kernels::name, TANDEM_CUDA_OP_KERNEL(name));
TANDEM_BACKEND_OPS(TANDEM_DEFINE_OP)
#undef TANDEM_DEFINE_OP
}  // namespace dispatch

const std::vector<const OpInfo*>& OpTable() {
#define TANDEM_OP_INFO(name, dtypes, aliasing, params) &dispatch::name.info(),
  static const std::vector<const OpInfo*> table = {TANDEM_BACKEND_OPS(TANDEM_OP_INFO)};
#undef TANDEM_OP_INFO
  return table;
}

}  // namespace tandem
