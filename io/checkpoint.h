// Checkpoints: the training state as plain host data, captured from a model
// and an optimizer and restored into them.
//
// A CheckpointState is a pure value: named host tensors (parameters and
// optimizer state), the optimizer's step count, where in the data the run
// stands (epoch, batch within the epoch), the seed and RNG words, and named
// uint64 lists (the model's state words: dropout offsets). Capture copies it out of a model and an
// optimizer; Restore copies it back after checking ALL of it first, so a
// checkpoint that does not fit the model changes nothing. Nothing here knows
// about communicators: parallel/checkpointer.h adds the distributed save.
//
//   TrainingProgress progress;
//   progress.epoch = epoch;                        // the epoch in progress
//   progress.batch_in_epoch = batches.position();  // batches already done
//   progress.seed = config.seed;
//   WriteCheckpoint("/ckpt/checkpoint.tnd", Capture(model, optimizer, progress));
//   ...
//   CheckpointState state = ReadCheckpoint("/ckpt/checkpoint.tnd");
//   Restore(state, model, optimizer);  // throws, changing nothing, on mismatch
//   batches.Seek(state.batch_in_epoch);
//
// The state's file (format, atomic write, validating read) is
// io/checkpoint_format.h, which this header includes: WriteCheckpoint,
// ReadCheckpoint, CheckpointState.
//
// A sharded optimizer (Optimizer::sharded(), --shard_optimizer) holds only
// this worker's blocks of its state, under other names. Its whole state is
// gathered by the data-parallel hook that owns the shards, under the names
// and shapes an unsharded optimizer gives it, and handed to Capture and
// Restore explicitly; the file is then the one an unsharded run writes, and
// resumes at any worker count, sharded or not:
//
//   auto whole = hook.GatherState();  // every rank (parallel/sharded_optimizer.h)
//   if (rank == 0) state = Capture(model, optimizer, whole, progress);
//   ...
//   auto saved = Restore(state, model, optimizer, UnshardedStateShapes(optimizer));
//   hook.LoadState(saved);            // each rank takes its blocks
#ifndef TANDEM_IO_CHECKPOINT_H_
#define TANDEM_IO_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "io/checkpoint_format.h"
#include "layers/layer.h"
#include "layers/optimizer.h"

namespace tandem {

// What the trainer knows and the model does not.
struct TrainingProgress {
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  uint64_t seed = 0;
  std::vector<uint64_t> rng_words;  // RngWords(rng) if a host RNG continues
};

// The extra_u64 key under which Capture keeps the model's state word `name`
// (Layer::State): "state.<name>", e.g. "state.block1.drop.offset".
inline constexpr const char* kStateWordPrefix = "state.";
std::string StateWordKey(const std::string& name);

// Copies `model`'s parameters and state words (every layer's in the tree,
// Layer::Parameters and Layer::State), `optimizer`'s state tensors and step
// count into a new state, with `progress`. Throws if two tensors or two
// state words share a name.
CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const TrainingProgress& progress);

// As Capture, with `optimizer_state` (names and tensors, on any device) in
// place of optimizer.State(): a sharded optimizer's whole state, gathered.
// It must hold exactly the tensors UnshardedStateShapes(optimizer) names,
// each of its shape, in any order; the state lists them in that order, so
// the checkpoint is the one an unsharded optimizer gives. The step count is
// optimizer.steps().
CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                        const TrainingProgress& progress);

// Copies `state` back into `model` and `optimizer` (parameters, state
// words, optimizer state and steps). Every check is made before anything is
// changed: each model and optimizer tensor must be in the checkpoint with
// the same shape, each state word must have its value, and the checkpoint
// must hold no tensor or state word the model lacks. On failure it throws tandem::Error
// naming the first problem (and how many more there are), e.g.
//   "checkpoint tensor 'fc1.weight' is [512, 784] but the model's is
//    [256, 784]"
// and the model and optimizer are as they were. Does not touch the data
// position or RNG: the trainer reads those from `state`.
// A sharded optimizer is refused (its state is not under the checkpoint's
// names): use the overload below.
void Restore(const CheckpointState& state, Layer& model, Optimizer& optimizer);

// As Restore, except that the optimizer's state is not copied into
// `optimizer`: the checkpoint's optimizer tensors are checked against
// `optimizer_state` (each name with its shape, e.g. UnshardedStateShapes)
// with everything else, before anything is changed, and returned on the
// host in that order, for the caller to load (ShardedOptimizerHook::
// LoadState). Restores the parameters, state words and optimizer.steps().
std::vector<std::pair<std::string, Tensor>> Restore(
    const CheckpointState& state, Layer& model, Optimizer& optimizer,
    const std::vector<std::pair<std::string, Shape>>& optimizer_state);

// The names and shapes an unsharded optimizer over `optimizer`'s parameters
// gives its state, in its order: each parameter's name with each suffix of
// its state ("fc1.weight.adam_m" [out, in], "fc1.weight.adam_v", ...). For
// an unsharded optimizer, those of State(); for a sharded one, the suffixes
// are its shards' (every shard keeps the same kinds of state).
std::vector<std::pair<std::string, Shape>> UnshardedStateShapes(Optimizer& optimizer);

// A host RNG as words for CheckpointState::rng_words, and back: RestoreRng
// gives Rng(state.seed) continuing from the saved state, and throws unless
// rng_words holds exactly the 4 words RngWords writes.
std::vector<uint64_t> RngWords(const Rng& rng);
Rng RestoreRng(const CheckpointState& state);

}  // namespace tandem

#endif  // TANDEM_IO_CHECKPOINT_H_
