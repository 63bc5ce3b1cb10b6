// Saving and finding checkpoints in a data-parallel run.
//
// Every rank holds the same parameters and optimizer state (the reducer
// keeps replicas identical), so one copy is enough: rank 0 writes it and
// the others wait until the file is in place. Loading needs no collective:
// every rank reads the file itself (in mpi mode on several hosts, `dir`
// must be on a file system they share).
//
//   // Every rank, at the same step:
//   SaveCheckpoint(worker.comm, "/ckpt/run1",
//                  Capture(*model, *optimizer, progress));
//
//   // At start-up, every rank:
//   if (std::optional<CheckpointState> s = LoadLatestCheckpoint("/ckpt/run1")) {
//     Restore(*s, *model, *optimizer);
//     start_epoch = s->epoch;  start_batch = s->batch_in_epoch;
//   }
//
// See Note [Resuming with another worker count] in checkpointer.cc.
#ifndef TANDEM_PARALLEL_CHECKPOINTER_H_
#define TANDEM_PARALLEL_CHECKPOINTER_H_

#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "parallel/communicator.h"

namespace tandem {

// The file a checkpoint directory holds: dir + "/checkpoint.tnd".
inline constexpr char kCheckpointFileName[] = "checkpoint.tnd";
std::string CheckpointPath(const std::string& dir);

// Creates `dir` and its missing parents, and checks that a file can be
// created there (by creating and removing one). "" when it can; otherwise
// what failed ("cannot create checkpoint directory /ckpt: /ckpt: Permission
// denied"). Not collective: a run calls it before training, so that a
// directory it cannot write is found then, not when the run ends.
std::string PrepareCheckpointDir(const std::string& dir);

// Collective: every rank must call it, with the same `dir`. Rank 0 creates
// `dir` (and its parents) if needed and writes CheckpointPath(dir)
// atomically (WriteCheckpoint); then every rank waits for every other, so
// when any rank returns the file is complete. Only rank 0's `state` is
// used. If rank 0 fails, rank 0 rethrows its error and every other rank
// throws tandem::Error saying that rank 0's save failed: all ranks fail
// together rather than some training on.
void SaveCheckpoint(Communicator& comm, const std::string& dir,
                    const CheckpointState& state);

// Reads CheckpointPath(dir). std::nullopt when `dir` or the file does not
// exist (a fresh run); a file that exists but is malformed, a FIFO or a
// symbolic link to nothing throws, naming it, rather than silently starting
// over. A partial temporary file of an interrupted save is ignored; a
// complete one later than the checkpoint throws, saying how to use it (Note
// [A complete temporary checkpoint] in checkpointer.cc).
std::optional<CheckpointState> LoadLatestCheckpoint(const std::string& dir);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_CHECKPOINTER_H_
