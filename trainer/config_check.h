// What Train checks before it trains, so that a mistake costs the user a
// second, not a run: every flag's range, flags that contradict each other,
// the device, the directories of the output files, and that the checkpoint
// --resume would continue is this run's. Each failure is a UsageError naming
// the flag and saying what to do.
//
//   CheckConfig(config);                          // before loading anything
//   CheckResumable(config, train.size());         // before any worker starts
#ifndef TANDEM_TRAINER_CONFIG_CHECK_H_
#define TANDEM_TRAINER_CONFIG_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/directory_lock.h"
#include "trainer/train_config.h"

namespace tandem {

// Throws UsageError for the first problem found.
void CheckConfig(const TrainConfig& config);

// In the process that writes checkpoints (threads mode, or rank 0 under
// mpirun): creates --checkpoint_dir, checks that it can be written now,
// not when the run ends, and locks it for this run (io/directory_lock.h),
// returning the lock to hold until the run ends. Nothing without a
// checkpoint directory or in the other ranks. Throws UsageError naming
// the flag, or the run that holds the directory.
std::optional<DirectoryLock> PrepareAndLockCheckpointDir(const TrainConfig& config);

// A file written during or at the end of the run (named by `flag`): its
// directory must exist and be writable now, not after hours of training.
// Nothing for an empty path.
void CheckOutputFile(const char* flag, const std::string& path);

bool IsDirectory(const std::string& path);

// "" when `path` is a regular file this process can read; otherwise what is
// wrong, to follow the path in a message: "does not exist", "is a
// directory", "is not a regular file (a FIFO, socket or device)", "is a
// symbolic link to a file that does not exist", "cannot be read (...)".
// Looks without opening: opening a FIFO would block.
std::string ReadableFileProblem(const std::string& path);

// What a checkpoint must match to be resumed by a configuration: the data
// order and the meaning of its position depend on them. Saved under
// kRunKey in CheckpointState::extra_u64.
inline constexpr char kRunKey[] = "run.seed_batch_examples";
std::vector<uint64_t> RunKey(const TrainConfig& config, int64_t train_examples);

// Throws UsageError unless `state` (read from `config.checkpoint_dir`) was
// saved by a run whose RunKey is `key`, naming what differs.
void CheckRunKey(const CheckpointState& state, const std::vector<uint64_t>& key,
                 const TrainConfig& config);

// With --resume: the checkpoint in --checkpoint_dir, if there is one, must be
// this run's (CheckRunKey). Read once here, before the workers start, so that
// every worker count and mode fails the same way.
void CheckResumable(const TrainConfig& config, int64_t train_examples);

}  // namespace tandem

#endif  // TANDEM_TRAINER_CONFIG_CHECK_H_
