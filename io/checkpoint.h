// Checkpoints: the training state as plain host data, and the file format
// that stores it.
//
// A CheckpointState is a pure value: named host tensors (parameters and
// optimizer state), the optimizer's step count, where in the data the run
// stands (epoch, batch within the epoch), the seed and RNG words, and named
// uint64 lists (dropout offsets). Capture copies it out of a model and an
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
// The file format (version 1; every integer and float little-endian):
//
//   "TANDEMCK"                              8-byte magic
//   u32 format_version                      1
//   u64 body_bytes                          bytes of the body that follows
//   body:
//     i64 step, i64 epoch, i64 batch_in_epoch, u64 seed
//     u64 n, u64 rng_words[n]
//     u64 n, then n x { str key, u64 m, u64 words[m] }       extra_u64
//     u64 n, then n x { str name, u32 rank, i64 dims[rank],
//                       f32 data[product(dims)] }             tensors
//   u32 crc32                               zlib's crc32 of every byte after
//                                           the magic and before the crc
//   (str = u32 length, then that many bytes of UTF-8; no terminator)
//
// WriteCheckpoint replaces the file atomically (see Note [Atomic replace] in
// checkpoint.cc): after a crash or a kill during a save, the path holds
// either the previous checkpoint or the new one, never a mixture.
// ReadCheckpoint throws tandem::Error naming the file for every malformed
// input (missing, not a checkpoint, another format version, truncated,
// corrupt, inconsistent) and never allocates more than the file's size.
#ifndef TANDEM_IO_CHECKPOINT_H_
#define TANDEM_IO_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/optimizer.h"

namespace tandem {

// The format version this build writes and the only one it reads.
inline constexpr uint32_t kCheckpointFormatVersion = 1;

// One tensor of a checkpoint, on the host.
struct NamedTensor {
  std::string name;          // "fc1.weight", "fc1.weight.adam_m"
  Shape shape;               // [512, 784]
  std::vector<float> data;   // NumElements(shape) floats, row-major

  bool operator==(const NamedTensor& other) const;  // bitwise on data
};

struct CheckpointState {
  // Optimizer steps taken (Optimizer::steps()); also the global step count
  // of a trainer that steps once per global batch.
  int64_t step = 0;
  // The data position: the epoch in progress and how many of its batches
  // are done (BatchIterator::position()). Resuming continues with batch
  // `batch_in_epoch` of EpochOrder(seed, epoch).
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  // The run's seed (shuffling, initialisation).
  uint64_t seed = 0;
  // A host RNG's state (RngWords), or empty.
  std::vector<uint64_t> rng_words;
  // Named lists of words: Capture stores each Dropout layer's offset as
  // "dropout.<layer name>.offset"; trainers may add their own keys.
  std::map<std::string, std::vector<uint64_t>> extra_u64;
  // Parameters, then optimizer state, in the order Capture met them.
  std::vector<NamedTensor> tensors;

  // Bitwise equality (NaN payloads included); for tests and the fuzzer.
  bool operator==(const CheckpointState& other) const;
  bool operator!=(const CheckpointState& other) const {
    return !(*this == other);
  }
};

// What the trainer knows and the model does not.
struct TrainingProgress {
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  uint64_t seed = 0;
  std::vector<uint64_t> rng_words;  // RngWords(rng) if a host RNG continues
};

// The Extra key Capture and Restore use for a Dropout layer's offset.
std::string DropoutOffsetKey(const std::string& layer_name);

// Copies `model`'s parameters, `optimizer`'s state tensors and step count,
// and the offsets of every Dropout layer in `model` (found by dynamic_cast,
// inside Sequential models at any depth) into a new state, with `progress`.
// Throws if two tensors or two dropout layers share a name.
CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const TrainingProgress& progress);

// Copies `state` back into `model` and `optimizer` (parameters, optimizer
// state and steps, dropout offsets). Every check is made before anything is
// changed: each model and optimizer tensor must be in the checkpoint with
// the same shape, the checkpoint must hold no tensor the model lacks, each
// Dropout layer must have its offset. On failure it throws tandem::Error
// naming the first problem (and how many more there are), e.g.
//   "checkpoint tensor 'fc1.weight' is [512, 784] but the model's is
//    [256, 784]"
// and the model and optimizer are as they were. Does not touch the data
// position or RNG: the trainer reads those from `state`.
void Restore(const CheckpointState& state, Layer& model, Optimizer& optimizer);

// A host RNG as words for CheckpointState::rng_words, and back: RestoreRng
// gives Rng(state.seed) continuing from the saved state, and throws unless
// rng_words holds exactly the 4 words RngWords writes.
std::vector<uint64_t> RngWords(const Rng& rng);
Rng RestoreRng(const CheckpointState& state);

// Writes `state` to `path` atomically: to path + ".tmp", fsync, rename over
// `path`, fsync the directory. Throws tandem::Error naming the path when any
// step fails (the previous checkpoint, if any, is then untouched).
void WriteCheckpoint(const std::string& path, const CheckpointState& state);

// Reads and fully validates a checkpoint; see the format above.
CheckpointState ReadCheckpoint(const std::string& path);

namespace internal {

// The bytes WriteCheckpoint writes for `state`.
std::string EncodeCheckpoint(const CheckpointState& state);

// Parses a checkpoint held in memory; errors start with `name`.
// verify_checksum = false is for the fuzzer only, so that it explores the
// parser behind the checksum; every other check still applies.
CheckpointState DecodeCheckpoint(const uint8_t* data, size_t size,
                                 const std::string& name,
                                 bool verify_checksum = true);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_IO_CHECKPOINT_H_
