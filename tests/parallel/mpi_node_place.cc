// Prints where each rank of an MPI job sits, for tests/parallel/
// two_hosts_test.sh, which starts it over two simulated hosts and checks
// that each host's ranks got local ranks 0..k-1 (and with them, under
// --device=cuda, GPUs 0..k-1 of their own node):
//
//   $ mpirun -np 4 mpi_node_place   # 2 slots on each of two hosts
//   place: rank 0 of 4, local rank 0 of 2, host hostA, single_node 0, rank sum 6
//   ...
//
// The rank sum is an all-reduce over every rank (0 + 1 + ... + n-1), so a
// line also shows that a collective crossed the hosts. Exits non-zero if a
// rank's communicator is not an MpiCommunicator or the sum is wrong.
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "parallel/launcher.h"
#include "parallel/mpi_communicator.h"

namespace tandem {
namespace {

std::string HostName() {
  char name[256] = "?";
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

void PrintPlace(Worker& w) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&w.comm);
  TANDEM_CHECK(mpi != nullptr) << "rank " << w.rank << ": the host communicator is "
                               << w.comm.Describe() << ", not an MpiCommunicator";
  float sum = static_cast<float>(w.rank);
  w.comm.AllReduce(&sum, 1, ReduceOp::kSum)->Wait();
  const float expected = w.size * (w.size - 1) / 2.f;
  TANDEM_CHECK(sum == expected) << "rank " << w.rank << ": the all-reduced sum of ranks is "
                                << sum << ", expected " << expected;
  // One write per line, so that mpirun does not interleave ranks' lines.
  std::ostringstream line;
  line << "place: rank " << w.rank << " of " << w.size << ", local rank " << mpi->local_rank()
       << " of " << mpi->local_size() << ", host " << HostName() << ", single_node "
       << mpi->single_node() << ", rank sum " << sum << "\n";
  std::cout << line.str() << std::flush;
}

}  // namespace
}  // namespace tandem

int main() {
  tandem::LaunchOptions options;
  options.mode = tandem::LaunchMode::kMpi;
  options.collective_timeout_s = 30;
  tandem::Launch(options, tandem::PrintPlace);
  return 0;
}
