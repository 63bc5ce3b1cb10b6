// Internal to parallel/pipeline: the communicators of each stage's replica
// group, which all-reduce that stage's gradients when a pipeline has more
// than one replica. A stage whose replicas are on CPUs gets a ThreadGroup
// (parallel/thread_communicator.h); one whose replicas are on GPUs gets a
// device group from the factory (parallel/device_communicators.h), one GPU
// per replica.
//
//   StageReplicaGroups groups(devices, /*stages=*/2, /*replicas=*/2);
//   Reducer reducer(stage_model, groups.comms(stage, replica), options);
//   groups.Abort("stage 1 of replica 0 failed");   // from any thread
#ifndef TANDEM_PARALLEL_PIPELINE_GROUPS_H_
#define TANDEM_PARALLEL_PIPELINE_GROUPS_H_

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "parallel/communicator.h"
#include "parallel/device_communicators.h"
#include "parallel/thread_communicator.h"

namespace tandem {
namespace internal {

class StageReplicaGroups {
 public:
  // devices[r * stages + s] runs stage s of replica r. With one replica
  // there are no groups. Throws for a stage whose replicas mix CPUs and
  // GPUs or share a GPU, or (GPUs) for a build without device
  // communicators.
  StageReplicaGroups(const std::vector<Device>& devices, int stages, int replicas);
  StageReplicaGroups(const StageReplicaGroups&) = delete;
  StageReplicaGroups& operator=(const StageReplicaGroups&) = delete;

  // Replica `replica`'s communicators of stage `stage`'s group; empty with
  // one replica.
  std::vector<Communicator*> comms(int stage, int replica);
  // Aborts every group: their collectives, waiting or later, throw
  // CollectiveAbortedError. Callable from any thread.
  void Abort(const std::string& reason);

 private:
  void MakeGroup(int stage, const std::vector<Device>& replicas);

  // Per stage; one of the two is set when there are replicas.
  std::vector<std::unique_ptr<ThreadGroup>> thread_groups_;
  std::vector<std::unique_ptr<DeviceGroup>> device_groups_;
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_PARALLEL_PIPELINE_GROUPS_H_
