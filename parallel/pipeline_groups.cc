#include "parallel/pipeline_groups.h"

#include <algorithm>

#include "core/check.h"

namespace tandem {
namespace internal {

StageReplicaGroups::StageReplicaGroups(const std::vector<Device>& devices,
                                       int stages, int replicas) {
  if (replicas <= 1) return;
  thread_groups_.resize(stages);
  device_groups_.resize(stages);
  for (int s = 0; s < stages; ++s) {
    std::vector<Device> stage_devices;
    for (int r = 0; r < replicas; ++r) {
      stage_devices.push_back(devices.at(static_cast<size_t>(r) * stages + s));
    }
    MakeGroup(s, stage_devices);
  }
}

void StageReplicaGroups::MakeGroup(int stage, const std::vector<Device>& replicas) {
  std::vector<int> gpus;
  int cpus = 0;
  for (Device d : replicas) {
    if (d.is_cpu()) {
      ++cpus;
      continue;
    }
    TANDEM_CHECK(std::find(gpus.begin(), gpus.end(), d.index) == gpus.end())
        << "pipeline: two replicas of stage " << stage << " are on " << d
        << ": a stage's replicas need one GPU each (its gradient all-reduce "
           "runs one rank per GPU); give them different devices";
    gpus.push_back(d.index);
  }
  TANDEM_CHECK(cpus == 0 || gpus.empty())
      << "pipeline: the replicas of stage " << stage
      << " mix CPU and GPU devices; a stage's replicas must all be on CPUs "
         "or all on GPUs";
  if (gpus.empty()) {
    thread_groups_[stage] = std::make_unique<ThreadGroup>(static_cast<int>(replicas.size()));
  } else {
    device_groups_[stage] = MakeThreadDeviceGroup(gpus, /*comms=*/1, DeviceCommOptions());
  }
}

std::vector<Communicator*> StageReplicaGroups::comms(int stage, int replica) {
  if (stage < static_cast<int>(thread_groups_.size()) && thread_groups_[stage]) {
    return {&thread_groups_[stage]->communicator(replica)};
  }
  if (stage < static_cast<int>(device_groups_.size()) && device_groups_[stage]) {
    return device_groups_[stage]->comms(replica);
  }
  return {};
}

void StageReplicaGroups::Abort(const std::string& reason) {
  for (auto& group : thread_groups_) {
    if (group) group->Abort(reason);
  }
  for (auto& group : device_groups_) {
    if (group) group->Abort(reason);
  }
}

}  // namespace internal
}  // namespace tandem
