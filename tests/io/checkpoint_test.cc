// Tests io/checkpoint.h: bitwise round trips of the file format and of
// Capture/Restore, Restore's all-or-nothing validation, a clear error naming
// the file for every kind of malformed file (every truncation, every flipped
// byte, wrong version, wrong magic, absurd sizes behind a valid checksum,
// missing file), and atomic replacement when the writer is killed mid-save.
#include "io/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "io/atomic_file.h"
#include "layers/dropout.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/residual.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "writing " << path;
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

// The message of the tandem::Error that fn throws ("" if none).
template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A small state with every field and awkward float bit patterns.
CheckpointState SmallState() {
  CheckpointState s;
  s.step = 1234;
  s.epoch = 3;
  s.batch_in_epoch = 17;
  s.seed = 0xFEEDFACECAFEBEEFull;
  s.rng_words = {1, 2, 0xFFFFFFFFFFFFFFFFull, 4};
  s.extra_u64["dropout.drop1.offset"] = {987654321012ull};
  s.extra_u64["empty"] = {};
  const float nan_payload = [] {
    uint32_t bits = 0x7FC00123u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }();
  s.tensors.push_back({"fc1.weight",
                       {2, 3},
                       {1.5f, -0.f, std::numeric_limits<float>::denorm_min(),
                        nan_payload, -std::numeric_limits<float>::infinity(),
                        3.4e38f}});
  s.tensors.push_back({"fc1.bias", {2}, {0.25f, -7.f}});
  s.tensors.push_back({"scalar", {}, {42.f}});
  s.tensors.push_back({"empty", {0, 5}, {}});
  return s;
}

TEST(CheckpointFileTest, RoundTripIsBitwise) {
  const CheckpointState state = SmallState();
  const std::string path = TempPath("roundtrip.tnd");
  WriteCheckpoint(path, state);
  EXPECT_FALSE(Exists(TemporaryPathFor(path))) << "the temporary file must be renamed";
  const CheckpointState back = ReadCheckpoint(path);
  EXPECT_TRUE(back == state);
  // The NaN payload survives (operator== compares bits; check explicitly too).
  uint32_t bits;
  std::memcpy(&bits, &back.tensors[0].data[3], 4);
  EXPECT_EQ(bits, 0x7FC00123u);
  // The file is exactly the in-memory encoding, and canonical.
  EXPECT_EQ(ReadBytes(path), internal::EncodeCheckpoint(state));
  EXPECT_EQ(internal::EncodeCheckpoint(back), internal::EncodeCheckpoint(state));
}

TEST(CheckpointFileTest, EmptyStateRoundTrips) {
  const std::string path = TempPath("empty.tnd");
  WriteCheckpoint(path, CheckpointState{});
  EXPECT_TRUE(ReadCheckpoint(path) == CheckpointState{});
}

TEST(CheckpointFileTest, OverwriteReplacesThePreviousCheckpoint) {
  const std::string path = TempPath("overwrite.tnd");
  CheckpointState a = SmallState();
  WriteCheckpoint(path, a);
  CheckpointState b = a;
  b.step = 99;
  b.tensors.pop_back();
  WriteCheckpoint(path, b);
  EXPECT_TRUE(ReadCheckpoint(path) == b);
}

TEST(CheckpointFileTest, LayoutIsLittleEndianAsDocumented) {
  CheckpointState s;
  s.step = 0x0102030405060708;
  s.tensors.push_back({"w", {1}, {1.f}});
  const std::string bytes = internal::EncodeCheckpoint(s);
  ASSERT_EQ(bytes.substr(0, 8), "TANDEMCK");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\0\0\0", 4));  // version 1
  // body: 4 x 8 (step, epoch, batch, seed) + 8 (no rng words) + 8 (no
  // extras) + 8 (count) + 4 + 1 ("w") + 4 (rank) + 8 (dim) + 4 (data).
  const uint64_t body = 32 + 8 + 8 + 8 + 4 + 1 + 4 + 8 + 4;
  EXPECT_EQ(bytes.size(), 20 + body + 4);
  EXPECT_EQ(static_cast<uint8_t>(bytes[12]), body);
  EXPECT_EQ(bytes.substr(20, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  // 1.0f is 0x3F800000.
  EXPECT_EQ(bytes.substr(bytes.size() - 8, 4), std::string("\0\0\x80\x3F", 4));
  // The checksum is zlib's crc32 of everything after the magic.
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + 8),
                          static_cast<uInt>(bytes.size() - 12));
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= uint32_t{static_cast<uint8_t>(bytes[bytes.size() - 4 + i])} << (8 * i);
  }
  EXPECT_EQ(stored, static_cast<uint32_t>(crc));
}

TEST(CheckpointFileTest, WriterRefusesStatesTheReaderWouldReject) {
  const std::string path = TempPath("invalid.tnd");
  CheckpointState s;
  s.tensors.push_back({"w", {2, 2}, {1.f}});
  EXPECT_NE(ErrorOf([&] { WriteCheckpoint(path, s); })
                .find("tensor 'w' has shape [2, 2] but 1 values"),
            std::string::npos);
  s.tensors = {{"w", {1}, {1.f}}, {"w", {1}, {2.f}}};
  EXPECT_NE(ErrorOf([&] { WriteCheckpoint(path, s); })
                .find("two tensors are named 'w'"),
            std::string::npos);
  s.tensors.clear();
  s.step = -1;
  EXPECT_NE(ErrorOf([&] { WriteCheckpoint(path, s); }).find("must be >= 0"),
            std::string::npos);
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(TemporaryPathFor(path)));
}

TEST(CheckpointFileTest, WriteIntoMissingDirectoryNamesThePath) {
  const std::string path = TempPath("no/such/dir/ck.tnd");
  const std::string error =
      ErrorOf([&] { WriteCheckpoint(path, SmallState()); });
  EXPECT_NE(error.find("writing checkpoint " + path), std::string::npos) << error;
  EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

// --- malformed files: every one fails with an error naming the file ------

TEST(CheckpointReadTest, MissingFile) {
  const std::string path = TempPath("does_not_exist.tnd");
  const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
  EXPECT_NE(error.find(path + ": cannot open checkpoint: No such file or directory"),
            std::string::npos)
      << error;
}

TEST(CheckpointReadTest, Directory) {
  const std::string error =
      ErrorOf([&] { ReadCheckpoint(::testing::TempDir()); });
  EXPECT_NE(error.find("is a directory"), std::string::npos) << error;
}

TEST(CheckpointReadTest, EveryTruncationIsReportedAsTruncated) {
  const std::string full = internal::EncodeCheckpoint(SmallState());
  const std::string path = TempPath("truncated.tnd");
  for (size_t length = 0; length < full.size(); ++length) {
    WriteBytes(path, full.substr(0, length));
    const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
    EXPECT_NE(error.find(path + ": truncated checkpoint"), std::string::npos)
        << "prefix of " << length << " of " << full.size()
        << " bytes gave: " << error;
  }
}

TEST(CheckpointReadTest, EveryFlippedByteIsCaught) {
  const std::string full = internal::EncodeCheckpoint(SmallState());
  const std::string path = TempPath("flipped.tnd");
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      std::string bytes = full;
      bytes[i] = static_cast<char>(bytes[i] ^ mask);
      WriteBytes(path, bytes);
      const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
      ASSERT_FALSE(error.empty())
          << "flipping bit mask " << int{mask} << " of byte " << i
          << " went unnoticed";
      EXPECT_EQ(error.find(path + ": "), 0u) << error;
      // Past the header, only the checksum can notice.
      if (i >= 20) {
        EXPECT_NE(error.find("checksum mismatch"), std::string::npos)
            << "byte " << i << ": " << error;
      }
    }
  }
}

TEST(CheckpointReadTest, WrongVersion) {
  std::string bytes = internal::EncodeCheckpoint(SmallState());
  bytes[8] = 7;
  const std::string path = TempPath("version.tnd");
  WriteBytes(path, bytes);
  const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
  EXPECT_NE(error.find(path + ": checkpoint format version 7, this build reads 1"),
            std::string::npos)
      << error;
}

TEST(CheckpointReadTest, WrongMagic) {
  const std::string path = TempPath("magic.tnd");
  // A gzip file where a checkpoint was expected.
  WriteBytes(path, std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10));
  const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
  EXPECT_NE(error.find(path + ": not a Tandem checkpoint: it starts with bytes "
                              "1F 8B 08 00 00 00 00 00, expected \"TANDEMCK\""),
            std::string::npos)
      << error;
}

TEST(CheckpointReadTest, TrailingBytes) {
  const std::string path = TempPath("trailing.tnd");
  WriteBytes(path, internal::EncodeCheckpoint(SmallState()) + "xyz");
  const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
  EXPECT_NE(error.find(path + ": 3 unexpected bytes after the checkpoint's checksum"),
            std::string::npos)
      << error;
}

// Rewrites the checksum of an encoded checkpoint after a deliberate edit, so
// that the structural checks behind the checksum are what is tested.
void Reseal(std::string& bytes) {
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + 8),
                          static_cast<uInt>(bytes.size() - 12));
  for (int i = 0; i < 4; ++i) {
    bytes[bytes.size() - 4 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  }
}

void PutU64(std::string& bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

TEST(CheckpointReadTest, AbsurdSizesBehindAValidChecksumAllocateNothingHuge) {
  CheckpointState s;
  s.tensors.push_back({"w", {2}, {1.f, 2.f}});
  const std::string good = internal::EncodeCheckpoint(s);
  const std::string path = TempPath("absurd.tnd");
  // Offsets: header 20; step..seed 20..52; rng count 52; extra count 60;
  // tensor count 68; name length 76; "w" 80; rank 81; dim 85; data 93.
  struct Case {
    size_t at;
    uint64_t value;
    const char* expected;
  } cases[] = {
      {52, uint64_t{1} << 61, "the RNG word count is 2305843009213693952"},
      {60, ~uint64_t{0}, "the extra entry count is"},
      {68, uint64_t{1} << 40, "the tensor count is"},
      {85, uint64_t{1} << 62, "has shape [4611686018427387904], more than"},
      {85, ~uint64_t{0}, "has dimension -1"},
      {20, ~uint64_t{0}, "step, epoch and batch_in_epoch must be >= 0"},
  };
  for (const Case& c : cases) {
    std::string bytes = good;
    PutU64(bytes, c.at, c.value);
    Reseal(bytes);
    WriteBytes(path, bytes);
    const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
    EXPECT_NE(error.find(path + ": malformed checkpoint: "), std::string::npos)
        << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
  // Found by the fuzzer: a zero dimension makes the tensor empty, but the
  // other dimensions must still multiply within int64, or NumElements
  // overflows (undefined behaviour) on the shape.
  {
    CheckpointState z;
    z.tensors.push_back({"z", {0, 1, 1}, {}});
    std::string bytes = internal::EncodeCheckpoint(z);
    // Dims of "z" start at 76 + 4 + 1 + 4 = 85.
    PutU64(bytes, 93, uint64_t{1} << 62);
    PutU64(bytes, 101, uint64_t{1} << 62);
    Reseal(bytes);
    WriteBytes(path, bytes);
    const std::string error = ErrorOf([&] { ReadCheckpoint(path); });
    EXPECT_NE(error.find("tensor 'z' has shape [0, 4611686018427387904, "
                         "4611686018427387904], whose dimensions multiply past 2^63"),
              std::string::npos)
        << error;
    z.tensors[0].shape = {0, int64_t{1} << 62, int64_t{1} << 62};
    EXPECT_NE(ErrorOf([&] { WriteCheckpoint(path, z); }).find("multiply to less than 2^63"),
              std::string::npos);
  }
  // A rank beyond the limit, and a huge name length.
  std::string bytes = good;
  bytes[81] = 9;
  Reseal(bytes);
  WriteBytes(path, bytes);
  EXPECT_NE(ErrorOf([&] { ReadCheckpoint(path); }).find("has rank 9, at most 8"),
            std::string::npos);
  bytes = good;
  bytes[79] = 0x7F;
  Reseal(bytes);
  WriteBytes(path, bytes);
  EXPECT_NE(ErrorOf([&] { ReadCheckpoint(path); }).find("a tensor name is"),
            std::string::npos);
}

TEST(CheckpointReadTest, DuplicateTensorNamesAreMalformed) {
  CheckpointState s;
  s.tensors.push_back({"a", {1}, {1.f}});
  s.tensors.push_back({"b", {1}, {2.f}});
  std::string bytes = internal::EncodeCheckpoint(s);
  // Tensor "a" takes bytes 76..96 (name length, "a", rank, dim, data), so
  // the second name's one byte is at 76 + 21 + 4.
  ASSERT_EQ(bytes[101], 'b');
  bytes[101] = 'a';
  Reseal(bytes);
  const std::string path = TempPath("duplicate.tnd");
  WriteBytes(path, bytes);
  EXPECT_NE(ErrorOf([&] { ReadCheckpoint(path); }).find("tensor 'a' appears twice"),
            std::string::npos);
}

// --- atomic replacement --------------------------------------------------

TEST(CheckpointAtomicityTest, StaleTemporaryFileIsHarmless) {
  const std::string path = TempPath("stale.tnd");
  const CheckpointState old_state = SmallState();
  WriteCheckpoint(path, old_state);
  // What a save killed half-way leaves behind.
  const std::string full = internal::EncodeCheckpoint(old_state);
  WriteBytes(TemporaryPathFor(path), full.substr(0, full.size() / 2));
  EXPECT_TRUE(ReadCheckpoint(path) == old_state);
  CheckpointState new_state = old_state;
  new_state.step += 1;
  WriteCheckpoint(path, new_state);
  EXPECT_TRUE(ReadCheckpoint(path) == new_state);
  EXPECT_FALSE(Exists(TemporaryPathFor(path)));
}

off_t FileSize(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 ? info.st_size : -1;
}

// A child process starts saving a 64 MiB state over an existing checkpoint
// and is SIGKILLed once the temporary file holds at least 4 MiB: the
// previous checkpoint must still load, bit for bit.
TEST(CheckpointAtomicityTest, KillDuringSaveLeavesThePreviousCheckpoint) {
  const std::string path = TempPath("killed.tnd");
  const CheckpointState old_state = SmallState();
  WriteCheckpoint(path, old_state);
  CheckpointState big = old_state;
  big.step = 1;
  big.tensors = {{"big", {16 << 20}, std::vector<float>(16 << 20, 0.5f)}};
  CheckpointState one = big;
  one.tensors[0] = {"big", {1}, {0.5f}};
  const off_t big_bytes = static_cast<off_t>(
      internal::EncodeCheckpoint(one).size() + 4 * ((16 << 20) - 1));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    // The child must not return into GoogleTest.
    try {
      WriteCheckpoint(path, big);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Wait (up to 60 s: sanitizers are slow) until the child is well into
  // the data.
  const off_t kill_after = 4 << 20;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  off_t seen = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    seen = FileSize(TemporaryPathFor(path, child));
    if (seen >= kill_after) break;
    std::this_thread::yield();
  }
  EXPECT_GE(seen, kill_after) << "the child did not get going within 60 s";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child finished the save before it could be killed (status "
      << status << "); the kill did not land mid-save";
  const off_t partial = FileSize(TemporaryPathFor(path, child));
  // Usually partial; complete if the kill landed in the fsync before the
  // rename. Either way `path` must still be the old checkpoint.
  EXPECT_GE(partial, kill_after);
  EXPECT_LE(partial, big_bytes);
  std::cout << "killed the writer with " << partial << " of " << big_bytes
            << " bytes written to " << TemporaryPathFor(path, child) << "\n";
  // The previous checkpoint is intact; the partial .tmp is not a checkpoint.
  EXPECT_TRUE(ReadCheckpoint(path) == old_state);
  EXPECT_NE(ErrorOf([&] { ReadCheckpoint(TemporaryPathFor(path, child)); }).find("truncated"),
            std::string::npos);
  // And the next save succeeds over the leftovers.
  WriteCheckpoint(path, big);
  EXPECT_TRUE(ReadCheckpoint(path) == big);
}

// --- Capture and Restore -------------------------------------------------

struct Trainer {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  Device device;

  Trainer(const std::vector<int64_t>& sizes, const std::string& optimizer_name,
          uint64_t init_seed, Device d = Device::Cpu(),
          Precision precision = Precision::kFp32)
      : device(d) {
    Rng rng(init_seed);
    MlpOptions options;
    options.dropout = 0.25f;
    options.dropout_seed = 5;
    options.device = d;
    options.precision = precision;
    model = Mlp(sizes, Activation::kRelu, rng, options);
    OptimizerConfig config;
    config.name = optimizer_name;
    config.lr = 0.01f;
    optimizer = MakeOptimizer(config, model->Parameters());
  }

  // One step on a fixed batch derived from `step_seed`.
  void Step(uint64_t step_seed) {
    const int64_t in = model->Parameters()[0].value().dim(1);
    Rng rng(step_seed);
    std::vector<float> x(4 * in), y(4);
    for (float& v : x) v = rng.Normal();
    for (float& v : y) v = static_cast<float>(rng.UniformInt(3));
    SoftmaxCrossEntropyLoss loss;
    optimizer->ZeroGrad();
    loss.Forward(model->Forward(Tensor::FromVector(x, {4, in}, device)),
                 Tensor::FromVector(y, {4}, device));
    model->Backward(loss.Backward());
    optimizer->Step();
  }

  CheckpointState Snapshot() { return Capture(*model, *optimizer, {}); }
};

class CheckpointRestoreTest : public DeviceTest {};

TEST_P(CheckpointRestoreTest, CaptureRestoreResumesBitForBit) {
  Trainer a({6, 5, 3}, "adamw", 1, device());
  a.Step(100);
  a.Step(101);
  TrainingProgress progress;
  progress.epoch = 2;
  progress.batch_in_epoch = 7;
  progress.seed = 42;
  Rng host_rng(42);
  host_rng.NextU64();
  progress.rng_words = RngWords(host_rng);
  const CheckpointState saved = Capture(*a.model, *a.optimizer, progress);
  EXPECT_EQ(saved.step, 2);
  EXPECT_EQ(saved.epoch, 2);
  EXPECT_EQ(saved.batch_in_epoch, 7);
  EXPECT_EQ(saved.seed, 42u);
  // fc1.{weight,bias}, fc2.{weight,bias}, and adam_m/adam_v of each.
  EXPECT_EQ(saved.tensors.size(), 4u + 8u);
  ASSERT_EQ(saved.extra_u64.count("state.drop1.offset"), 1u);
  EXPECT_EQ(saved.extra_u64.at("state.drop1.offset"),
            std::vector<uint64_t>{2 * 4 * 5});  // 2 steps of [4, 5]

  const std::string path = TempPath("resume_" + std::to_string(device().is_cpu()) + ".tnd");
  WriteCheckpoint(path, saved);
  const CheckpointState loaded = ReadCheckpoint(path);

  // A fresh trainer, initialised differently, restored from the file.
  Trainer b({6, 5, 3}, "adamw", 999, device());
  Restore(loaded, *b.model, *b.optimizer);
  EXPECT_TRUE(b.Snapshot() == a.Snapshot());
  EXPECT_EQ(b.optimizer->steps(), 2);
  Rng resumed_rng = RestoreRng(loaded);
  EXPECT_EQ(resumed_rng.NextU64(), host_rng.NextU64());

  // Both continue identically: the resumed run is the uninterrupted one.
  a.Step(102);
  b.Step(102);
  EXPECT_TRUE(b.Snapshot() == a.Snapshot());
}

// Checkpoints keep float32 masters whatever the precision: a bf16 run resumes
// as fp32 and an fp32 run as bf16, with the working copies made from the
// restored masters; the bf16 run also resumes bitwise as itself.
TEST_P(CheckpointRestoreTest, ResumesAcrossPrecisions) {
  Trainer half({6, 5, 3}, "adamw", 1, device(), Precision::kBf16);
  half.Step(100);
  half.Step(101);
  const CheckpointState saved = half.Snapshot();
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    Trainer other({6, 5, 3}, "adamw", 999, device(), p);
    Restore(saved, *other.model, *other.optimizer);
    EXPECT_TRUE(other.Snapshot() == saved) << PrecisionName(p);
    for (const NamedParameter& param : other.model->Parameters()) {
      EXPECT_EQ(param.value().dtype(), DType::kFloat32);
      if (param.working() == nullptr) continue;
      std::vector<float> rounded = param.value().ToVector();
      for (float& v : rounded) v = RoundToBFloat16(v);
      EXPECT_EQ(param.working()->ToVector(), rounded) << param.name;
    }
    if (p == Precision::kBf16) {
      Trainer uninterrupted({6, 5, 3}, "adamw", 1, device(), Precision::kBf16);
      uninterrupted.Step(100);
      uninterrupted.Step(101);
      uninterrupted.Step(102);
      other.Step(102);
      EXPECT_TRUE(other.Snapshot() == uninterrupted.Snapshot());
    }
  }
  Trainer full({6, 5, 3}, "adamw", 1, device(), Precision::kFp32);
  full.Step(100);
  Trainer as_half({6, 5, 3}, "adamw", 999, device(), Precision::kBf16);
  Restore(full.Snapshot(), *as_half.model, *as_half.optimizer);
  EXPECT_TRUE(as_half.Snapshot() == full.Snapshot());
}

INSTANTIATE_DEVICE_TEST_SUITE_P(CheckpointRestoreTest);

// --- The optimizer's state given explicitly (sharded optimizers) -----------

std::vector<std::pair<std::string, Tensor>> StateOf(Optimizer& optimizer) {
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto& [name, tensor] : optimizer.State()) state.push_back({name, *tensor});
  return state;
}

// The state given as a list, in any order, captures what the optimizer's
// own gives, in its order; a list that lacks a tensor, or holds another, is
// refused. UnshardedStateShapes of an unsharded optimizer are its State()'s.
TEST(CheckpointExplicitStateTest, CapturesAsTheOptimizerDoes) {
  Trainer a({6, 5, 3}, "adamw", 1);
  a.Step(100);
  a.Step(101);
  TrainingProgress progress;
  progress.epoch = 1;
  progress.batch_in_epoch = 3;
  std::vector<std::pair<std::string, Tensor>> given = StateOf(*a.optimizer);
  std::reverse(given.begin(), given.end());
  EXPECT_TRUE(Capture(*a.model, *a.optimizer, given, progress) ==
              Capture(*a.model, *a.optimizer, progress));
  std::vector<std::pair<std::string, Shape>> expected;
  for (auto& [name, tensor] : a.optimizer->State()) expected.push_back({name, tensor->shape()});
  EXPECT_EQ(UnshardedStateShapes(*a.optimizer), expected);

  given.pop_back();  // fc1.weight.adam_m, reversed
  std::string error = ErrorOf([&] { Capture(*a.model, *a.optimizer, given, progress); });
  EXPECT_NE(error.find("has no 'fc1.weight.adam_m' [5, 6]"), std::string::npos) << error;
  given = StateOf(*a.optimizer);
  given.push_back({"fc9.weight.adam_m", Tensor::Zeros({2})});
  error = ErrorOf([&] { Capture(*a.model, *a.optimizer, given, progress); });
  EXPECT_NE(error.find("has 'fc9.weight.adam_m', which optimizer adamw does not name"),
            std::string::npos)
      << error;
}

// Restore with the state's names and shapes restores the model and the
// step count, and hands the optimizer's tensors back (the optimizer's own
// are left alone); one that does not fit changes nothing, naming the tensor.
TEST(CheckpointExplicitStateTest, RestoreChecksTheStateAndHandsItBack) {
  Trainer a({6, 5, 3}, "adamw", 1);
  a.Step(100);
  a.Step(101);
  const CheckpointState saved = a.Snapshot();
  Trainer b({6, 5, 3}, "adamw", 999);
  const std::vector<std::pair<std::string, Shape>> shapes = UnshardedStateShapes(*b.optimizer);
  const std::vector<std::pair<std::string, Tensor>> handed =
      Restore(saved, *b.model, *b.optimizer, shapes);
  EXPECT_EQ(b.optimizer->steps(), 2);
  ASSERT_EQ(handed.size(), shapes.size());
  const std::vector<std::pair<std::string, Tensor>> theirs = StateOf(*a.optimizer);
  for (size_t i = 0; i < handed.size(); ++i) {
    EXPECT_EQ(handed[i].first, theirs[i].first);
    EXPECT_TRUE(handed[i].second.device().is_cpu());
    EXPECT_EQ(handed[i].second.ToVector(), theirs[i].second.ToVector()) << handed[i].first;
  }
  for (auto& [name, tensor] : b.optimizer->State()) {
    for (float v : tensor->ToVector()) ASSERT_EQ(v, 0.f) << name << " was written";
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b.Snapshot().tensors[i], saved.tensors[i]) << saved.tensors[i].name;
  }

  Trainer c({6, 5, 3}, "adamw", 7);
  const CheckpointState before = c.Snapshot();
  std::vector<std::pair<std::string, Shape>> wrong = shapes;
  wrong[0].second = {6, 5};
  std::string error = ErrorOf([&] { Restore(saved, *c.model, *c.optimizer, wrong); });
  EXPECT_NE(error.find("checkpoint tensor 'fc1.weight.adam_m' is [5, 6] but optimizer adamw's "
                       "is [6, 5]"),
            std::string::npos)
      << error;
  wrong = shapes;
  wrong.pop_back();  // fc2.bias.adam_v is then in the file but matches nothing
  error = ErrorOf([&] { Restore(saved, *c.model, *c.optimizer, wrong); });
  EXPECT_NE(error.find("'fc2.bias.adam_v' [3] matches nothing"), std::string::npos) << error;
  EXPECT_TRUE(c.Snapshot() == before) << "a failed Restore changed the model";
  EXPECT_EQ(c.optimizer->steps(), 0);
}

// A sharded optimizer's State() holds its shards only: the plain Capture and
// Restore refuse it, saying what to use, and UnshardedStateShapes names the
// whole state by parameter, as an unsharded optimizer would.
TEST(CheckpointExplicitStateTest, ShardedOptimizerNeedsItsStateGiven) {
  Trainer t({6, 5, 3}, "adamw", 1);
  const std::vector<std::pair<std::string, Shape>> whole = UnshardedStateShapes(*t.optimizer);
  // Two flat pieces of 24 elements: this worker's shards of two buckets.
  std::vector<ParameterShard> shards;
  for (int b = 0; b < 2; ++b) {
    shards.push_back({"bucket" + std::to_string(b) + ".shard0of2", Tensor::Zeros({24}),
                      Tensor::Zeros({24})});
  }
  t.optimizer->ShardState(std::move(shards));
  ASSERT_EQ(t.optimizer->State().size(), 4u);  // bucketB.shard0of2.adam_{m,v}
  EXPECT_EQ(UnshardedStateShapes(*t.optimizer), whole);
  std::string error = ErrorOf([&] { t.Snapshot(); });
  EXPECT_NE(error.find("Capture: optimizer 'adamw' keeps sharded state"), std::string::npos)
      << error;
  EXPECT_NE(error.find("GatherState"), std::string::npos) << error;
  Trainer a({6, 5, 3}, "adamw", 2);
  error = ErrorOf([&] { Restore(a.Snapshot(), *t.model, *t.optimizer); });
  EXPECT_NE(error.find("Restore: optimizer 'adamw' keeps sharded state"), std::string::npos)
      << error;
  const std::vector<std::pair<std::string, Tensor>> handed =
      Restore(a.Snapshot(), *t.model, *t.optimizer, whole);
  EXPECT_EQ(handed.size(), whole.size());
}

TEST(CheckpointRestoreErrorTest, WrongShapeNamesTensorAndShapesAndChangesNothing) {
  Trainer saved({784, 512, 10}, "adamw", 1);
  saved.Step(1);
  const CheckpointState state = saved.Snapshot();

  Trainer other({784, 256, 10}, "adamw", 2);
  other.Step(7);
  const CheckpointState before = other.Snapshot();
  const std::string error =
      ErrorOf([&] { Restore(state, *other.model, *other.optimizer); });
  EXPECT_NE(error.find("checkpoint tensor 'fc1.weight' is [512, 784] but the "
                       "model's is [256, 784]"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("nothing was restored"), std::string::npos) << error;
  // fc1.weight, fc1.bias, fc2.weight and their 6 Adam moments: 9 problems.
  EXPECT_NE(error.find("(and 6 more)"), std::string::npos) << error;
  EXPECT_TRUE(other.Snapshot() == before) << "a failed Restore changed the model";
  EXPECT_EQ(other.optimizer->steps(), 1);
}

TEST(CheckpointRestoreErrorTest, OtherOptimizerIsRejectedWithoutChanges) {
  Trainer adam({6, 5, 3}, "adamw", 1);
  adam.Step(1);
  Trainer sgd({6, 5, 3}, "sgd", 2);  // momentum 0.9: "<param>.momentum"
  const CheckpointState before = sgd.Snapshot();
  const std::string error =
      ErrorOf([&] { Restore(adam.Snapshot(), *sgd.model, *sgd.optimizer); });
  EXPECT_NE(error.find("checkpoint has no tensor 'fc1.weight.momentum' "
                       "(optimizer sgd's is [5, 6])"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("--optimizer"), std::string::npos) << error;
  EXPECT_TRUE(sgd.Snapshot() == before);
}

TEST(CheckpointRestoreErrorTest, ExtraTensorAndMissingDropoutOffsetAreRejected) {
  Trainer t({6, 5, 3}, "adamw", 1);
  t.Step(1);
  const CheckpointState before = t.Snapshot();

  CheckpointState extra = before;
  extra.tensors.push_back({"fc9.weight", {2, 2}, {1, 2, 3, 4}});
  extra.tensors[0].data[0] += 1.f;  // would change the model if applied
  std::string error = ErrorOf([&] { Restore(extra, *t.model, *t.optimizer); });
  EXPECT_NE(error.find("checkpoint tensor 'fc9.weight' [2, 2] matches nothing "
                       "in the model or the optimizer"),
            std::string::npos)
      << error;
  EXPECT_TRUE(t.Snapshot() == before);

  CheckpointState no_offset = before;
  no_offset.extra_u64.erase("state.drop1.offset");
  no_offset.tensors[0].data[0] += 1.f;
  error = ErrorOf([&] { Restore(no_offset, *t.model, *t.optimizer); });
  EXPECT_NE(error.find("checkpoint has no state word 'drop1.offset' (key 'state.drop1.offset')"),
            std::string::npos)
      << error;
  EXPECT_TRUE(t.Snapshot() == before);

  CheckpointState other_word = before;
  other_word.extra_u64["state.block9.drop.offset"] = {3};
  error = ErrorOf([&] { Restore(other_word, *t.model, *t.optimizer); });
  EXPECT_NE(error.find("checkpoint has 'state.block9.drop.offset' but the model has no such "
                       "state word"),
            std::string::npos)
      << error;
  EXPECT_TRUE(t.Snapshot() == before);

  CheckpointState bad_values = before;
  bad_values.tensors[0].data.pop_back();
  error = ErrorOf([&] { Restore(bad_values, *t.model, *t.optimizer); });
  EXPECT_NE(error.find("has shape [5, 6] but 29 values"), std::string::npos)
      << error;
  EXPECT_TRUE(t.Snapshot() == before);
}

TEST(CheckpointRestoreErrorTest, RestoreRngNeedsFourWords) {
  CheckpointState s;
  s.rng_words = {1, 2};
  EXPECT_NE(ErrorOf([&] { RestoreRng(s); }).find("2 RNG words, expected 4"),
            std::string::npos);
}

// A user's container: it only lists its children (Layer::Children), and
// gets its parameters and state from them under its name.
class TwoBranches : public Layer {
 public:
  TwoBranches(std::string name, std::unique_ptr<Layer> a, std::unique_ptr<Layer> b)
      : name_(std::move(name)), a_(std::move(a)), b_(std::move(b)) {}
  Tensor Forward(const Tensor& x) override { return x; }
  Tensor Backward(const Tensor& dy) override { return dy; }
  std::vector<Layer*> Children() override { return {a_.get(), b_.get()}; }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  std::unique_ptr<Layer> a_, b_;
};

// Dropout at the top, in a nested Sequential, in a Residual, and in a
// Sequential inside a user container: every offset is captured, under the
// names the tree gives, and restored.
std::unique_ptr<Sequential> NestedDropouts() {
  auto model = std::make_unique<Sequential>("outer");
  auto inner = std::make_unique<Sequential>("inner");
  inner->Emplace<Dropout>("deep_drop", 0.5f, 3);
  model->Add(std::move(inner));
  model->Emplace<Dropout>("top_drop", 0.5f, 4);
  model->Emplace<Residual>("block", std::make_unique<Dropout>("drop", 0.5f, 5));
  auto branch = std::make_unique<Sequential>("left");
  branch->Emplace<Dropout>("drop", 0.5f, 6);
  model->Emplace<TwoBranches>("pair", std::move(branch),
                              std::make_unique<Dropout>("right_drop", 0.5f, 7));
  return model;
}

TEST(CheckpointCaptureTest, CapturesAndRestoresStateAtAnyDepth) {
  std::unique_ptr<Sequential> model = NestedDropouts();
  uint64_t next = 11;
  for (StateWord& w : model->State()) *w.value = next++;
  Sgd sgd({}, SgdParams{});
  const CheckpointState s = Capture(*model, sgd, {});
  EXPECT_EQ(s.extra_u64.at("state.deep_drop.offset"), std::vector<uint64_t>{11});
  EXPECT_EQ(s.extra_u64.at("state.top_drop.offset"), std::vector<uint64_t>{12});
  EXPECT_EQ(s.extra_u64.at("state.block.drop.offset"), std::vector<uint64_t>{13});
  EXPECT_EQ(s.extra_u64.at("state.pair.drop.offset"), std::vector<uint64_t>{14});
  EXPECT_EQ(s.extra_u64.at("state.pair.right_drop.offset"), std::vector<uint64_t>{15});

  std::unique_ptr<Sequential> fresh = NestedDropouts();
  Restore(s, *fresh, sgd);
  std::vector<uint64_t> restored;
  for (const StateWord& w : fresh->State()) restored.push_back(*w.value);
  EXPECT_EQ(restored, (std::vector<uint64_t>{11, 12, 13, 14, 15}));
}

// Checkpoints of builds that kept only Dropout offsets, under
// "dropout.<layer>.offset", still restore them.
TEST(CheckpointCaptureTest, RestoresTheOlderDropoutOffsetKeys) {
  Sequential model("m");
  Dropout& drop = model.Emplace<Dropout>("drop1", 0.5f, 3);
  Sgd sgd({}, SgdParams{});
  CheckpointState s = Capture(model, sgd, {});
  s.extra_u64.clear();
  s.extra_u64["dropout.drop1.offset"] = {640};
  Restore(s, model, sgd);
  EXPECT_EQ(drop.offset(), 640u);
}

}  // namespace
}  // namespace tandem
