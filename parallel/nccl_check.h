// NCCL_CHECK: the check-macro family's member for NCCL calls.
//
//   NCCL_CHECK(ncclAllReduce(p, p, n, ncclFloat, ncclSum, comm, stream))
//       << "all-reducing " << n << " floats";
//   // -> "all-reducing 10 floats: NCCL error ncclInvalidArgument (invalid
//   //     argument (run with NCCL_DEBUG=WARN for details)): <NCCL's last
//   //     message> [ncclAllReduce(...) at parallel/x.cc:12]"
//
// On a result other than ncclSuccess it throws tandem::Error carrying the
// message, the result's name and NCCL's text for it, NCCL's last error
// message (ncclGetLastError, which often names the cause: "Cuda failure 'out
// of memory'", "peer rank 1 closed the connection"), the call and file:line.
//
// Never use it in a destructor: release with the raw call there and at most
// log (NcclComm and NcclMemory in nccl_handle.h do, through LogIfNcclError).
#ifndef TANDEM_PARALLEL_NCCL_CHECK_H_
#define TANDEM_PARALLEL_NCCL_CHECK_H_

#include <nccl.h>

#include <string>

#include "core/check.h"

namespace tandem {
namespace internal {

inline bool NcclOk(ncclResult_t result) { return result == ncclSuccess; }

// "ncclInvalidArgument": NCCL has no function for a result's name.
inline const char* NcclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult_t";
  }
}

inline std::string NcclErrorText(ncclResult_t result) {
  std::string text = std::string("NCCL error ") + NcclResultName(result) +
                     " (" + ncclGetErrorString(result) + ")";
  // NCCL keeps one process-wide "last error"; the argument is unused. It can
  // be stale (from an earlier failure), so it is context, not the verdict.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') text += std::string(": ") + last;
  return text;
}

}  // namespace internal
}  // namespace tandem

#define NCCL_CHECK(call, ...)                                         \
  TANDEM_CHECK_GEN(ncclResult_t, (call), ::tandem::internal::NcclOk, \
                   ::tandem::internal::NcclErrorText, #call, ##__VA_ARGS__)

#endif  // TANDEM_PARALLEL_NCCL_CHECK_H_
