#include "parallel/checkpointer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "core/check.h"

namespace tandem {

// Note [Resuming with another worker count]
// A checkpoint holds nothing that depends on the number of workers, and
// neither does the sequence of global batches the trainer walks:
//   - the global batch size is a flag (--batch_size) that each worker's
//     shard is cut from (ShardIndices), not a per-worker size;
//   - the example order of an epoch is EpochOrder(num_examples, seed, epoch),
//     computed identically by every rank from the seed alone;
//   - the position is (epoch, batch_in_epoch) in units of global batches,
//     and the step counter counts global steps (one optimizer step each);
//   - the loss is normalised by the global batch (Note [Gradient averaging]
//     in reducer.cc), so the averaged gradient is the full-batch gradient.
// So a run saved with --workers=4 and resumed with --workers=2 (or in
// another --mode) continues the same sequence of global batches from the
// same parameters and optimizer state: the sharding changes, the math does
// not. Two things do change, and make the continuation equal to the
// uninterrupted run mathematically but not bit for bit:
//   - the order in which the all-reduce adds the per-worker partial
//     gradients (float addition is not associative);
//   - dropout masks, which each rank draws from its own stream over its own
//     shard: the saved offsets are rank 0's (see the integration note in
//     docs/reliability.md).
// Resuming with the SAME worker count and no dropout continues bit for bit.

std::string CheckpointPath(const std::string& dir) {
  if (!dir.empty() && dir.back() == '/') return dir + kCheckpointFileName;
  return dir + "/" + kCheckpointFileName;
}

namespace {

// mkdir -p: creates `dir` and any missing parents.
void MakeDirectories(const std::string& dir) {
  TANDEM_CHECK(!dir.empty()) << "checkpoint directory is empty";
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0) {
      const int error = errno;
      struct stat info;
      TANDEM_CHECK(error == EEXIST && ::stat(prefix.c_str(), &info) == 0 &&
                   S_ISDIR(info.st_mode))
          << "cannot create checkpoint directory " << dir << ": " << prefix
          << ": " << (error == EEXIST ? "exists and is not a directory"
                                      : std::strerror(error));
    }
    if (end == std::string::npos) break;
  }
}

}  // namespace

void SaveCheckpoint(Communicator& comm, const std::string& dir,
                    const CheckpointState& state) {
  const std::string path = CheckpointPath(dir);
  std::exception_ptr failure;
  float failed = 0.f;
  if (comm.rank() == 0) {
    try {
      MakeDirectories(dir);
      WriteCheckpoint(path, state);
    } catch (...) {
      failure = std::current_exception();
      failed = 1.f;
    }
  }
  // The barrier the others wait at, carrying rank 0's outcome so that no
  // rank returns from a save that did not happen.
  comm.AllReduce(&failed, 1, ReduceOp::kSum)->Wait();
  if (failure) std::rethrow_exception(failure);
  if (failed != 0.f) {
    // A consequence of rank 0's failure, not a cause: the launcher reports
    // rank 0's own error in preference to this one.
    throw CollectiveAbortedError("collective aborted: rank 0 failed to save "
                                 "checkpoint " + path + "; see its error");
  }
}

std::optional<CheckpointState> LoadLatestCheckpoint(const std::string& dir) {
  const std::string path = CheckpointPath(dir);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    TANDEM_CHECK(error == ENOENT)
        << path << ": cannot look for a checkpoint: " << std::strerror(error)
        << (error == ENOTDIR ? " (the checkpoint directory is a file?)" : "");
    return std::nullopt;
  }
  return ReadCheckpoint(path);
}

}  // namespace tandem
