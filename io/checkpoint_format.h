// The checkpoint file: a CheckpointState (plain host data) written to and
// read from one atomic, checksummed file. io/checkpoint.h captures the state
// from a model and an optimizer and restores it; this header knows nothing
// of either.
//
//   WriteCheckpoint("/ckpt/checkpoint.tnd", state);
//   CheckpointState again = ReadCheckpoint("/ckpt/checkpoint.tnd");
//   // again == state, bit for bit
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
// io/atomic_file.cc): after a crash or a kill during a save, the path
// holds either the previous checkpoint or the new one, never a mixture.
// ReadCheckpoint throws tandem::Error naming the file for every malformed
// input (missing, not a checkpoint, another format version, truncated,
// corrupt, inconsistent) and never allocates more than the file's size.
#ifndef TANDEM_IO_CHECKPOINT_FORMAT_H_
#define TANDEM_IO_CHECKPOINT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

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
  // Named lists of words: Capture stores the model's state words
  // (Layer::State) as "state.<name>"; trainers may add their own keys.
  std::map<std::string, std::vector<uint64_t>> extra_u64;
  // Parameters, then optimizer state, in the order Capture met them.
  std::vector<NamedTensor> tensors;

  // Bitwise equality (NaN payloads included); for tests and the fuzzer.
  bool operator==(const CheckpointState& other) const;
  bool operator!=(const CheckpointState& other) const {
    return !(*this == other);
  }
};

// Writes `state` to `path` atomically: to TemporaryPathFor(path) (io/atomic_file.h), fsync, rename over
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

// The element count of `shape`, or false when a dimension is negative or the
// dimensions other than 0 multiply past int64: a checkpoint may not hold such
// a shape (NumElements would overflow). Restore checks states with it too.
bool CheckpointElementCount(const Shape& shape, uint64_t* count);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_IO_CHECKPOINT_FORMAT_H_
