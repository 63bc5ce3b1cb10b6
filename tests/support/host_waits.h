// How often the host waits for the GPU during data-parallel training steps,
// shared by the threads-mode and MPI-mode GPU reducer tests. A step must
// queue work and return: a wait (cudaStreamSynchronize, a blocking copy, an
// event sync) counts in cuda::HostWaitCount, which is process-wide.
#ifndef TANDEM_TESTS_SUPPORT_HOST_WAITS_H_
#define TANDEM_TESTS_SUPPORT_HOST_WAITS_H_

#include <cstdint>

#include "core/device.h"
#include "parallel/communicator.h"

namespace tandem {
namespace testing {

// Trains a small MLP on `device` through a Reducer over `gradient_comm`
// (several buckets), one warm-up step and then `steps` timed ones, and
// returns how many host waits the process counted during those steps. All
// ranks call it together; `host_comm` (the workers' host communicator)
// brackets the window with barriers, so in threads mode the count covers
// every worker's steps and no worker's set-up.
int64_t HostWaitsDuringSteps(Device device, int rank, Communicator& gradient_comm,
                             Communicator& host_comm, int steps);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_HOST_WAITS_H_
