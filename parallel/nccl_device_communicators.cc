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

void CheckLanes(const char* function, int lanes) {
  TANDEM_CHECK(lanes >= 1) << function << ": " << lanes
                           << " communicators per rank; ask for at least 1";
}

// One NcclThreadGroup per lane, over the same GPUs.
class NcclDeviceGroup final : public DeviceGroup {
 public:
  NcclDeviceGroup(const std::vector<int>& gpus, int lanes, const DeviceCommOptions& options) {
    groups_.reserve(static_cast<size_t>(lanes));
    for (int lane = 0; lane < lanes; ++lane) {
      groups_.push_back(std::make_unique<NcclThreadGroup>(gpus));
      for (int rank = 0; rank < groups_.back()->size(); ++rank) {
        groups_.back()->communicator(rank).set_timeout(options.timeout);
      }
    }
  }

  int size() const override { return groups_.front()->size(); }

  std::vector<Communicator*> lanes(int rank) override {
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

std::unique_ptr<DeviceGroup> MakeThreadDeviceGroup(const std::vector<int>& gpus, int lanes,
                                                   const DeviceCommOptions& options) {
  CheckLanes("MakeThreadDeviceGroup", lanes);
  TANDEM_CHECK(options.fingerprint_channel == nullptr)
      << "MakeThreadDeviceGroup: DeviceCommOptions::fingerprint_channel is one communicator, "
         "but each rank of a thread group needs its own; call set_fingerprint_channel on each "
         "communicator of lanes(rank) instead";
  return std::make_unique<NcclDeviceGroup>(gpus, lanes, options);
}

std::vector<std::unique_ptr<Communicator>> MakeRankDeviceCommunicators(
    Communicator& host, int gpu, int lanes, const DeviceCommOptions& options) {
  CheckLanes("MakeRankDeviceCommunicators", lanes);
  std::vector<std::unique_ptr<Communicator>> made;
  made.reserve(static_cast<size_t>(lanes));
  for (int lane = 0; lane < lanes; ++lane) {
    // Rank 0 of host makes each lane's NCCL id and broadcasts it.
    std::unique_ptr<NcclCommunicator> comm = NcclCommunicator::Create(host, gpu);
    comm->set_timeout(options.timeout);
    comm->set_fingerprint_channel(options.fingerprint_channel);
    made.push_back(std::move(comm));
  }
  return made;
}

}  // namespace tandem
