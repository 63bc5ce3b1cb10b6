// parallel/device_communicators.h over NCCL: the implementation parallel/BUILD
// chooses where Bazel found CUDA.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "parallel/device_communicators.h"
#include "parallel/nccl_communicator.h"
#include "parallel/nccl_thread_group.h"

namespace tandem {
namespace {

void CheckComms(const char* function, int comms) {
  TANDEM_CHECK(comms >= 1) << function << ": " << comms
                           << " communicators per rank; ask for at least 1";
}

// One NcclThreadGroup per comm, over the same GPUs.
class NcclDeviceGroup final : public DeviceGroup {
 public:
  NcclDeviceGroup(const std::vector<int>& gpus, int comms, const DeviceCommOptions& options) {
    groups_.reserve(static_cast<size_t>(comms));
    for (int i = 0; i < comms; ++i) {
      groups_.push_back(std::make_unique<NcclThreadGroup>(gpus));
      for (int rank = 0; rank < groups_.back()->size(); ++rank) {
        groups_.back()->communicator(rank).set_timeout(options.timeout);
      }
    }
  }

  int size() const override { return groups_.front()->size(); }

  std::vector<Communicator*> comms(int rank) override {
    std::vector<Communicator*> mine;
    mine.reserve(groups_.size());
    for (auto& group : groups_) mine.push_back(&group->communicator(rank));
    return mine;
  }

  void Abort(const std::string& reason) override {
    for (auto& group : groups_) group->Abort(reason);
  }

 private:
  std::vector<std::unique_ptr<NcclThreadGroup>> groups_;
};

}  // namespace

bool DeviceCommunicatorsAvailable(std::string* why) {
  if (why != nullptr) why->clear();
  return true;
}

std::unique_ptr<DeviceGroup> MakeThreadDeviceGroup(const std::vector<int>& gpus, int comms,
                                                   const DeviceCommOptions& options) {
  CheckComms("MakeThreadDeviceGroup", comms);
  TANDEM_CHECK(options.fingerprint_channel == nullptr)
      << "MakeThreadDeviceGroup: DeviceCommOptions::fingerprint_channel is one communicator, "
         "but each rank of a thread group needs its own; call set_fingerprint_channel on each "
         "communicator of comms(rank) instead";
  return std::make_unique<NcclDeviceGroup>(gpus, comms, options);
}

std::vector<std::unique_ptr<Communicator>> MakeRankDeviceCommunicators(
    Communicator& host, int gpu, int comms, const DeviceCommOptions& options) {
  CheckComms("MakeRankDeviceCommunicators", comms);
  std::vector<std::unique_ptr<Communicator>> made;
  made.reserve(static_cast<size_t>(comms));
  for (int i = 0; i < comms; ++i) {
    // Rank 0 of host makes each communicator's NCCL id and broadcasts it.
    std::unique_ptr<NcclCommunicator> comm = NcclCommunicator::Create(host, gpu);
    comm->set_timeout(options.timeout);
    comm->set_fingerprint_channel(options.fingerprint_channel);
    made.push_back(std::move(comm));
  }
  return made;
}

}  // namespace tandem
