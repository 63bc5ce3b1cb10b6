#include "parallel/checkpointer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "core/check.h"
#include "io/atomic_file.h"

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
// Resuming with the SAME worker count continues bit for bit, with dropout
// too where every rank's shards had rank 0's sizes (the batch a multiple of
// the worker count), so that every rank's offsets are rank 0's.

std::string CheckpointPath(const std::string& dir) {
  if (!dir.empty() && dir.back() == '/') return dir + kCheckpointFileName;
  return dir + "/" + kCheckpointFileName;
}

namespace {

// mkdir -p: creates `dir` and any missing parents. "" or what failed.
std::string MakeDirectories(const std::string& dir) {
  if (dir.empty()) return "checkpoint directory is empty";
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string prefix = dir.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0) {
      const int error = errno;
      struct stat info;
      if (!(error == EEXIST && ::stat(prefix.c_str(), &info) == 0 && S_ISDIR(info.st_mode))) {
        return "cannot create checkpoint directory " + dir + ": " + prefix + ": " +
               (error == EEXIST ? "exists and is not a directory" : std::strerror(error));
      }
    }
    if (end == std::string::npos) break;
  }
  return "";
}

}  // namespace

std::string PrepareCheckpointDir(const std::string& dir) {
  const std::string made = MakeDirectories(dir);
  if (!made.empty()) return made;
  // A name no other process uses (this one's host and pid).
  const std::string probe = TemporaryPathFor(dir + "/.tandem_write_probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return "cannot write in checkpoint directory " + dir + ": " + std::strerror(errno);
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

void SaveCheckpoint(Communicator& comm, const std::string& dir,
                    const CheckpointState& state) {
  const std::string path = CheckpointPath(dir);
  std::exception_ptr failure;
  float failed = 0.f;
  if (comm.rank() == 0) {
    try {
      const std::string made = MakeDirectories(dir);
      TANDEM_CHECK(made.empty()) << made;
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

namespace {

// The temporary files of saves into `dir` (io/atomic_file.h).
std::vector<std::string> TemporaryCheckpoints(const std::string& dir) {
  std::vector<std::string> found;
  const std::string prefix = TemporaryPrefixFor(kCheckpointFileName);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) found.push_back(entry->d_name);
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Note [A complete temporary checkpoint]
// A save killed between its fsync and its rename leaves a complete
// checkpoint under its temporary name, perhaps later than checkpoint.tnd or
// with none beside it. Resuming from the older one, or afresh, would throw
// away that training without a word; renaming it here would pick among
// writers behind the user's back. So a complete temporary later than the
// checkpoint (or with none) stops the run with what to do. Partial ones
// (killed mid-write) hold nothing and are left for the next save's cleanup.
void CheckNoLaterTemporary(const std::string& dir, const std::optional<int64_t>& step) {
  for (const std::string& name : TemporaryCheckpoints(dir)) {
    const std::string tmp = dir + "/" + name;
    struct stat info;
    if (::stat(tmp.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    std::optional<CheckpointState> state;
    try {
      state = ReadCheckpoint(tmp);
    } catch (const Error&) {
      continue;  // partial: the save was killed while writing it
    }
    if (step && state->step <= *step) continue;
    throw Error(tmp + " is a complete checkpoint (step " + std::to_string(state->step) + ") " +
                (step ? "later than " + CheckpointPath(dir) + " (step " + std::to_string(*step) + ")"
                      : "with no " + std::string(kCheckpointFileName) + " beside it") +
                ": a save was stopped before it put the file in place. To resume from it: mv " +
                tmp + " " + CheckpointPath(dir) + "; to ignore it, delete it");
  }
}

}  // namespace

std::optional<CheckpointState> LoadLatestCheckpoint(const std::string& dir) {
  const std::string path = CheckpointPath(dir);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    TANDEM_CHECK(error == ENOENT)
        << path << ": cannot look for a checkpoint: " << std::strerror(error)
        << (error == ENOTDIR ? " (the checkpoint directory is a file?)" : "");
    // A link to nothing is not "no checkpoint": the one it named is lost,
    // and starting afresh would replace the link without a word.
    TANDEM_CHECK(::lstat(path.c_str(), &info) != 0)
        << path << ": a symbolic link to a file that does not exist; remove it, or point it "
        << "at the checkpoint to resume from";
    CheckNoLaterTemporary(dir, std::nullopt);
    return std::nullopt;
  }
  CheckpointState state = ReadCheckpoint(path);
  CheckNoLaterTemporary(dir, state.step);
  return state;
}

}  // namespace tandem
