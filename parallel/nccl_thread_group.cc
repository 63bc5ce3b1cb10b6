#include "parallel/nccl_thread_group.h"

#include <utility>

#include "core/check.h"

namespace tandem {

NcclThreadGroup::NcclThreadGroup(const std::vector<int>& devices) {
  std::vector<NcclComm> comms = NcclComm::InitGroup(devices);
  const int n = static_cast<int>(comms.size());
  communicators_.reserve(comms.size());
  try {
    for (int r = 0; r < n; ++r) {
      communicators_.push_back(
          std::make_unique<NcclCommunicator>(std::move(comms[r]), r, n, devices[r]));
    }
  } catch (...) {
    // The ranks made so far would wait for the others when destroyed; the
    // handles not yet wrapped abort themselves (NcclComm).
    for (auto& communicator : communicators_) {
      communicator->Abort("NcclThreadGroup could not be created");
    }
    throw;
  }
}

NcclThreadGroup::~NcclThreadGroup() {
  // Rank by rank from one thread is how NCCL expects the ranks of one
  // process to be destroyed.
  for (auto& communicator : communicators_) communicator.reset();
}

NcclCommunicator& NcclThreadGroup::communicator(int rank) {
  TANDEM_CHECK(rank >= 0 && rank < size())
      << "NcclThreadGroup of " << size() << " ranks has no rank " << rank;
  return *communicators_[rank];
}

void NcclThreadGroup::Abort(const std::string& reason) {
  for (auto& communicator : communicators_) communicator->Abort(reason);
}

}  // namespace tandem
