// MPI_CHECK: the check-macro family's member for MPI calls.
//
//   MPI_CHECK(MPI_Bcast(data, n, MPI_FLOAT, root, comm)) << "broadcasting "
//                                                        << n << " floats";
//
// On a return code other than MPI_SUCCESS it throws tandem::Error carrying
// the message, MPI's error string ("MPI_ERR_ROOT: invalid root"), the call
// and file:line. MPI only returns error codes on communicators whose error
// handler is MPI_ERRORS_RETURN (MpiCommunicator sets it on its own); under
// MPI_COMM_WORLD's default handler a failing call ends the job first.
#ifndef TANDEM_PARALLEL_MPI_CHECK_H_
#define TANDEM_PARALLEL_MPI_CHECK_H_

#include <mpi.h>

#include <string>

#include "core/check.h"

namespace tandem {
namespace internal {

inline bool MpiOk(int code) { return code == MPI_SUCCESS; }

inline std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(text, length);
}

}  // namespace internal
}  // namespace tandem

#define MPI_CHECK(call, ...)                               \
  TANDEM_CHECK_GEN(int, (call), ::tandem::internal::MpiOk, \
                   ::tandem::internal::MpiErrorString, #call, ##__VA_ARGS__)

#endif  // TANDEM_PARALLEL_MPI_CHECK_H_
