// Fuzz target for io/checkpoint.h's reader.
//
// Each input goes through the reader twice:
//   1. ReadCheckpoint on the input as a file (memfd), checksum verified:
//      the path users take;
//   2. internal::DecodeCheckpoint with the checksum NOT verified, so that
//      mutations reach the structural parser behind it (a fuzzer rarely
//      forges a CRC-32).
// Whatever decodes must re-encode, and decode again to the same state
// (bitwise). Anything but a clean return or tandem::Error is a bug: another
// exception type, a crash, a sanitizer report, an allocation beyond the
// input's size (libFuzzer's -malloc_limit_mb catches those).
//
// Built as a libFuzzer binary by tools/fuzz.sh and as a CI test with
// fuzz_main.cc (tests/fuzz/BUILD).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/checkpoint.h"

namespace {

class MemFile {
 public:
  MemFile() : fd_(::memfd_create("checkpoint_fuzz_input", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  void Set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 ||
        (size > 0 && ::pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size))) {
      std::perror("writing the memfd");
      std::abort();
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// Re-encoding what was decoded must work and give back the same state.
// Called outside any try block: an exception here is a finding.
void CheckReencodes(const tandem::CheckpointState& state) {
  const std::string bytes = tandem::internal::EncodeCheckpoint(state);
  const tandem::CheckpointState again = tandem::internal::DecodeCheckpoint(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
      "<re-encoded>");
  if (again != state) {
    std::fprintf(stderr, "a decoded checkpoint did not survive re-encoding\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile* file = new MemFile();  // never freed: lives for the run
  file->Set(data, size);

  tandem::CheckpointState state;
  bool read = false;
  try {
    state = tandem::ReadCheckpoint(file->path());
    read = true;
  } catch (const tandem::Error&) {
  }
  if (read) CheckReencodes(state);

  bool decoded = false;
  try {
    state = tandem::internal::DecodeCheckpoint(data, size, "<fuzz input>",
                                               /*verify_checksum=*/false);
    decoded = true;
  } catch (const tandem::Error&) {
  }
  if (decoded) CheckReencodes(state);
  return 0;
}

// The seed corpus: small checkpoints the current writer produces.
std::vector<std::string> TandemFuzzSeeds() {
  using tandem::CheckpointState;
  std::vector<CheckpointState> states(4);
  // states[0]: empty.
  states[1].step = 10;
  states[1].epoch = 1;
  states[1].batch_in_epoch = 3;
  states[1].seed = 42;
  states[1].rng_words = {1, 2, 3, 4};
  states[1].extra_u64["dropout.drop1.offset"] = {640};
  states[1].tensors = {{"fc1.weight", {2, 3}, {1, 2, 3, 4, 5, 6}},
                       {"fc1.bias", {2}, {0.5f, -0.5f}},
                       {"fc1.weight.adam_m", {2, 3}, {0, 0, 0, 0, 0, 0}}};
  states[2].tensors = {{"scalar", {}, {1.f}},
                       {"empty", {0, 3}, {}},
                       {"r4", {1, 1, 1, 2}, {std::numeric_limits<float>::quiet_NaN(),
                                             -0.f}}};
  states[3].extra_u64 = {{"a", {}}, {"b", {1, 2}}, {"dropout.x.offset", {7}}};
  std::vector<std::string> seeds;
  for (const CheckpointState& s : states) {
    seeds.push_back(tandem::internal::EncodeCheckpoint(s));
  }
  // Regression: libFuzzer's first finding, a shape [0, 2^62, 2^62] (empty,
  // but its dimensions overflow NumElements). The checksum is left stale:
  // the unverified decode reaches the shape check.
  CheckpointState z;
  z.tensors = {{"z", {0, 1, 1}, {}}};
  std::string bytes = tandem::internal::EncodeCheckpoint(z);
  for (size_t at : {93, 101}) {
    for (int i = 0; i < 8; ++i) bytes[at + i] = i == 7 ? 0x40 : 0;
  }
  seeds.push_back(bytes);
  return seeds;
}
