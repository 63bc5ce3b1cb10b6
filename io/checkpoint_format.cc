#include "io/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include "core/check.h"
#include "io/atomic_file.h"

namespace tandem {
namespace {

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'C', 'K'};
constexpr size_t kMagicBytes = sizeof(kMagic);
// magic, version, body_bytes.
constexpr size_t kHeaderBytes = kMagicBytes + 4 + 8;
constexpr size_t kChecksumBytes = 4;
// Limits the reader enforces and the writer refuses to exceed, so that
// everything written can be read back.
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxNameBytes = 1 << 16;

// ---------------------------------------------------------------- encoding

// Little-endian bytes into a buffer that is handed to `flush` in chunks, with
// a running CRC-32 of everything that passes through.
class Encoder {
 public:
  using Flush = std::function<void(const char* data, size_t size)>;
  explicit Encoder(Flush flush) : flush_(std::move(flush)) {
    buffer_.reserve(kChunk);
  }

  void U32(uint32_t v) { Little(v, 4); }
  void U64(uint64_t v) { Little(v, 8); }
  void I64(int64_t v) { Little(static_cast<uint64_t>(v), 8); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Floats(const std::vector<float>& values) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    // The host's bytes already are the file's.
    Raw(reinterpret_cast<const char*>(values.data()),
        values.size() * sizeof(float));
#else
    for (float f : values) {
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      U32(bits);
    }
#endif
  }
  void Raw(const char* data, size_t size) {
    while (size > 0) {
      const size_t n = std::min(size, kChunk - buffer_.size());
      buffer_.append(data, n);
      data += n;
      size -= n;
      if (buffer_.size() == kChunk) Drain();
    }
  }
  // Writes what is buffered; returns the CRC-32 of every byte so far.
  uint32_t Finish() {
    Drain();
    return static_cast<uint32_t>(crc_);
  }

 private:
  static constexpr size_t kChunk = 1 << 20;

  void Little(uint64_t v, int bytes) {
    char b[8];
    for (int i = 0; i < bytes; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    Raw(b, bytes);
  }
  void Drain() {
    if (buffer_.empty()) return;
    crc_ = crc32(crc_, reinterpret_cast<const Bytef*>(buffer_.data()),
                 static_cast<uInt>(buffer_.size()));
    flush_(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  Flush flush_;
  std::string buffer_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

// a + b, throwing instead of wrapping (only absurd in-memory states get
// near this: the sizes are of real vectors).
uint64_t Add(uint64_t a, uint64_t b) {
  TANDEM_CHECK(a <= std::numeric_limits<uint64_t>::max() - b)
      << "checkpoint too large to encode";
  return a + b;
}

// Checks that the reader would accept `state`, and returns its body size.
uint64_t ValidateAndMeasure(const CheckpointState& state,
                            const std::string& context) {
  TANDEM_CHECK(state.step >= 0 && state.epoch >= 0 && state.batch_in_epoch >= 0)
      << context << ": step, epoch and batch_in_epoch must be >= 0, got "
      << state.step << ", " << state.epoch << ", " << state.batch_in_epoch;
  uint64_t bytes = 4 * 8;  // step, epoch, batch_in_epoch, seed
  bytes = Add(bytes, 8 + 8 * uint64_t{state.rng_words.size()});
  bytes = Add(bytes, 8);
  for (const auto& [key, words] : state.extra_u64) {
    TANDEM_CHECK(key.size() <= kMaxNameBytes)
        << context << ": extra key of " << key.size() << " bytes, at most "
        << kMaxNameBytes;
    bytes = Add(bytes, 4 + key.size() + 8 + 8 * uint64_t{words.size()});
  }
  bytes = Add(bytes, 8);
  std::set<std::string> names;
  for (const NamedTensor& t : state.tensors) {
    TANDEM_CHECK(names.insert(t.name).second)
        << context << ": two tensors are named '" << t.name << "'";
    TANDEM_CHECK(t.name.size() <= kMaxNameBytes)
        << context << ": tensor name of " << t.name.size()
        << " bytes, at most " << kMaxNameBytes;
    TANDEM_CHECK(t.shape.size() <= kMaxRank)
        << context << ": tensor '" << t.name << "' has rank "
        << t.shape.size() << ", at most " << kMaxRank;
    uint64_t count = 0;
    TANDEM_CHECK(internal::CheckpointElementCount(t.shape, &count))
        << context << ": tensor '" << t.name << "' has shape "
        << ShapeToString(t.shape)
        << ": dimensions must be >= 0 and multiply to less than 2^63";
    TANDEM_CHECK(count == t.data.size())
        << context << ": tensor '" << t.name << "' has shape "
        << ShapeToString(t.shape) << " but " << t.data.size() << " values";
    bytes = Add(bytes, 4 + t.name.size() + 4 + 8 * uint64_t{t.shape.size()});
    bytes = Add(bytes, 4 * uint64_t{t.data.size()});
  }
  return bytes;
}

// Writes the whole file format through `flush`; the caller has validated.
void Encode(const CheckpointState& state, uint64_t body_bytes,
            const Encoder::Flush& flush) {
  flush(kMagic, kMagicBytes);
  Encoder e(flush);
  e.U32(kCheckpointFormatVersion);
  e.U64(body_bytes);
  e.I64(state.step);
  e.I64(state.epoch);
  e.I64(state.batch_in_epoch);
  e.U64(state.seed);
  e.U64(state.rng_words.size());
  for (uint64_t w : state.rng_words) e.U64(w);
  e.U64(state.extra_u64.size());
  for (const auto& [key, words] : state.extra_u64) {
    e.Str(key);
    e.U64(words.size());
    for (uint64_t w : words) e.U64(w);
  }
  e.U64(state.tensors.size());
  for (const NamedTensor& t : state.tensors) {
    e.Str(t.name);
    e.U32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) e.I64(d);
    e.Floats(t.data);
  }
  const uint32_t crc = e.Finish();
  char tail[kChecksumBytes];
  for (size_t i = 0; i < kChecksumBytes; ++i) {
    tail[i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  }
  flush(tail, kChecksumBytes);
}

// ---------------------------------------------------------------- decoding

uint64_t LoadLittle(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

// Reads the body, checking before every read (and before every allocation)
// that the bytes are there: a count can never make it allocate more than
// the remaining input holds.
class Decoder {
 public:
  Decoder(const uint8_t* data, size_t size, const std::string& name)
      : p_(data), left_(size), name_(name) {}

  size_t left() const { return left_; }

  uint32_t U32(const char* what) { return static_cast<uint32_t>(Take(4, what)); }
  uint64_t U64(const char* what) { return Take(8, what); }
  int64_t I64(const char* what) { return static_cast<int64_t>(Take(8, what)); }

  // A count of items of at least `min_item_bytes` each.
  uint64_t Count(const char* what, size_t min_item_bytes) {
    const uint64_t n = U64(what);
    TANDEM_CHECK(n <= left_ / min_item_bytes)
        << name_ << ": malformed checkpoint: " << what << " is " << n
        << ", but only " << left_ << " bytes remain (at least "
        << min_item_bytes << " per item)";
    return n;
  }

  std::string Str(const char* what) {
    const uint32_t n = U32(what);
    TANDEM_CHECK(n <= kMaxNameBytes)
        << name_ << ": malformed checkpoint: " << what << " is " << n
        << " bytes long, at most " << kMaxNameBytes;
    Need(n, what);
    std::string s(reinterpret_cast<const char*>(p_), n);
    Skip(n);
    return s;
  }

  void Words(std::vector<uint64_t>& out, uint64_t n, const char* what) {
    Need(8 * n, what);  // n was bounded by Count
    out.resize(n);
    for (uint64_t i = 0; i < n; ++i) out[i] = U64(what);
  }

  void Floats(std::vector<float>& out, uint64_t n, const std::string& what) {
    Need(4 * n, what.c_str());  // n * 4 <= left_, checked by the caller
    out.resize(n);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n > 0) std::memcpy(out.data(), p_, 4 * n);
#else
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(LoadLittle(p_ + 4 * i, 4));
      std::memcpy(&out[i], &bits, sizeof(bits));
    }
#endif
    Skip(4 * n);
  }

 private:
  void Need(uint64_t n, const char* what) {
    TANDEM_CHECK(n <= left_)
        << name_ << ": malformed checkpoint: " << what << " needs " << n
        << " bytes, but only " << left_ << " remain in the body";
  }
  void Skip(size_t n) {
    p_ += n;
    left_ -= n;
  }
  uint64_t Take(int bytes, const char* what) {
    Need(bytes, what);
    const uint64_t v = LoadLittle(p_, bytes);
    Skip(bytes);
    return v;
  }

  const uint8_t* p_;
  size_t left_;
  const std::string& name_;
};

std::string HexBytes(const uint8_t* data, size_t size) {
  std::string text;
  char byte[4];
  for (size_t i = 0; i < size; ++i) {
    std::snprintf(byte, sizeof(byte), "%s%02X", i ? " " : "", data[i]);
    text += byte;
  }
  return text;
}

std::string Hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08X", v);
  return text;
}

void DecodeBody(Decoder& d, const std::string& name, CheckpointState& state) {
  state.step = d.I64("step");
  state.epoch = d.I64("epoch");
  state.batch_in_epoch = d.I64("batch_in_epoch");
  TANDEM_CHECK(state.step >= 0 && state.epoch >= 0 && state.batch_in_epoch >= 0)
      << name << ": malformed checkpoint: step, epoch and batch_in_epoch must "
      << "be >= 0, got " << state.step << ", " << state.epoch << ", "
      << state.batch_in_epoch;
  state.seed = d.U64("seed");

  d.Words(state.rng_words, d.Count("the RNG word count", 8), "RNG words");

  const uint64_t num_extra = d.Count("the extra entry count", 4 + 8);
  for (uint64_t i = 0; i < num_extra; ++i) {
    std::string key = d.Str("an extra key");
    std::vector<uint64_t> words;
    d.Words(words, d.Count("an extra word count", 8), "extra words");
    TANDEM_CHECK(state.extra_u64.emplace(key, std::move(words)).second)
        << name << ": malformed checkpoint: extra key '" << key
        << "' appears twice";
  }

  const uint64_t num_tensors = d.Count("the tensor count", 4 + 4);
  std::set<std::string> names;
  for (uint64_t i = 0; i < num_tensors; ++i) {
    NamedTensor t;
    t.name = d.Str("a tensor name");
    TANDEM_CHECK(names.insert(t.name).second)
        << name << ": malformed checkpoint: tensor '" << t.name
        << "' appears twice";
    const uint32_t rank = d.U32("a tensor rank");
    TANDEM_CHECK(rank <= kMaxRank)
        << name << ": malformed checkpoint: tensor '" << t.name << "' has rank "
        << rank << ", at most " << kMaxRank;
    for (uint32_t k = 0; k < rank; ++k) {
      const int64_t dim = d.I64("a tensor dimension");
      TANDEM_CHECK(dim >= 0) << name << ": malformed checkpoint: tensor '"
                             << t.name << "' has dimension " << dim;
      t.shape.push_back(dim);
    }
    uint64_t numel = 0;
    TANDEM_CHECK(internal::CheckpointElementCount(t.shape, &numel))
        << name << ": malformed checkpoint: tensor '" << t.name
        << "' has shape " << ShapeToString(t.shape)
        << ", whose dimensions multiply past 2^63";
    // Bounded by the bytes left, so the allocation is at most the input's
    // size.
    TANDEM_CHECK(numel <= d.left() / 4)
        << name << ": malformed checkpoint: tensor '" << t.name
        << "' has shape " << ShapeToString(t.shape) << ", more than the "
        << d.left() << " bytes left in the body hold";
    d.Floats(t.data, numel, "the data of tensor '" + t.name + "'");
    state.tensors.push_back(std::move(t));
  }
  TANDEM_CHECK(d.left() == 0)
      << name << ": malformed checkpoint: " << d.left()
      << " bytes after the last tensor, inside the body";
}

// ---------------------------------------------------------------- files

}  // namespace

bool NamedTensor::operator==(const NamedTensor& other) const {
  return name == other.name && shape == other.shape &&
         data.size() == other.data.size() &&
         (data.empty() ||
          std::memcmp(data.data(), other.data.data(),
                      data.size() * sizeof(float)) == 0);
}

bool CheckpointState::operator==(const CheckpointState& other) const {
  return step == other.step && epoch == other.epoch &&
         batch_in_epoch == other.batch_in_epoch && seed == other.seed &&
         rng_words == other.rng_words && extra_u64 == other.extra_u64 &&
         tensors == other.tensors;
}

// Atomic: see Note [Atomic replace] in io/atomic_file.cc.
void WriteCheckpoint(const std::string& path, const CheckpointState& state) {
  const std::string context = "writing checkpoint " + path;
  const uint64_t body_bytes = ValidateAndMeasure(state, context);
  WriteFileAtomically(path, context, [&](const ByteSink& write) {
    Encode(state, body_bytes, write);
  });
}

CheckpointState ReadCheckpoint(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) returns at once, and the
  // regular-file check below refuses it, where a plain open would block
  // until a writer came. It changes nothing for a regular file.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  TANDEM_CHECK(fd.get() >= 0)
      << path << ": cannot open checkpoint: " << Errno();
  struct stat info;
  TANDEM_CHECK(::fstat(fd.get(), &info) == 0)
      << path << ": cannot stat checkpoint: " << Errno();
  TANDEM_CHECK(!S_ISDIR(info.st_mode))
      << path << ": is a directory, expected a checkpoint file";
  TANDEM_CHECK(S_ISREG(info.st_mode))
      << path << ": not a regular file, expected a checkpoint file";
  // The file's size bounds every allocation from here on.
  std::vector<uint8_t> bytes(static_cast<size_t>(info.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n >= 0) << path << ": cannot read checkpoint: " << Errno();
    if (n == 0) break;  // the file shrank while we read: decode what is there
    got += static_cast<size_t>(n);
  }
  return internal::DecodeCheckpoint(bytes.data(), got, path);
}

namespace internal {

std::string EncodeCheckpoint(const CheckpointState& state) {
  const uint64_t body_bytes = ValidateAndMeasure(state, "encoding checkpoint");
  std::string out;
  Encode(state, body_bytes,
         [&](const char* data, size_t size) { out.append(data, size); });
  return out;
}

CheckpointState DecodeCheckpoint(const uint8_t* data, size_t size,
                                 const std::string& name,
                                 bool verify_checksum) {
  const size_t magic_seen = std::min(size, kMagicBytes);
  TANDEM_CHECK(magic_seen == 0 || std::memcmp(data, kMagic, magic_seen) == 0)
      << name << ": not a Tandem checkpoint: it starts with bytes "
      << HexBytes(data, magic_seen) << ", expected \"TANDEMCK\"";
  const auto truncated = [&](const char* needed) {
    return name + ": truncated checkpoint: the file has " +
           std::to_string(size) + " bytes, too few for " + needed +
           "; was the save interrupted?";
  };
  TANDEM_CHECK(size >= kMagicBytes + 4) << truncated("the format version");
  const uint32_t version =
      static_cast<uint32_t>(LoadLittle(data + kMagicBytes, 4));
  TANDEM_CHECK(version == kCheckpointFormatVersion)
      << name << ": checkpoint format version " << version
      << ", this build reads " << kCheckpointFormatVersion
      << (version > kCheckpointFormatVersion
              ? " (written by a newer Tandem?)"
              : "");
  TANDEM_CHECK(size >= kHeaderBytes) << truncated("the header");
  const uint64_t body_bytes = LoadLittle(data + kMagicBytes + 4, 8);
  const uint64_t after_header = size - kHeaderBytes;
  TANDEM_CHECK(body_bytes <= after_header &&
               after_header - body_bytes >= kChecksumBytes)
      << name << ": truncated checkpoint: the header promises " << body_bytes
      << " bytes of body and a " << kChecksumBytes << "-byte checksum after "
      << "the " << kHeaderBytes << "-byte header, but the file has " << size
      << " bytes; was the save interrupted?";
  const uint64_t trailing = after_header - body_bytes - kChecksumBytes;
  TANDEM_CHECK(trailing == 0)
      << name << ": " << trailing << " unexpected bytes after the checkpoint's "
      << "checksum (" << kHeaderBytes + body_bytes + kChecksumBytes
      << " bytes expected, the file has " << size << ")";
  const uint8_t* body = data + kHeaderBytes;
  if (verify_checksum) {
    const uint32_t stored =
        static_cast<uint32_t>(LoadLittle(body + body_bytes, 4));
    // Everything after the magic, up to the checksum.
    uLong crc = crc32(0L, Z_NULL, 0);
    for (const uint8_t* p = data + kMagicBytes; p < body + body_bytes;) {
      const size_t n = std::min<size_t>(body + body_bytes - p, 1u << 30);
      crc = crc32(crc, p, static_cast<uInt>(n));
      p += n;
    }
    TANDEM_CHECK(static_cast<uint32_t>(crc) == stored)
        << name << ": checkpoint checksum mismatch: stored " << Hex32(stored)
        << ", computed " << Hex32(static_cast<uint32_t>(crc))
        << "; the file is corrupt";
  }
  Decoder decoder(body, static_cast<size_t>(body_bytes), name);
  CheckpointState state;
  DecodeBody(decoder, name, state);
  return state;
}

// Dimensions other than 0 are multiplied with an overflow check; a 0 makes
// the count 0 whatever the others are. The fuzzer found [0, 2^62, 2^62]
// reaching NumElements (signed overflow) before this check existed.
bool CheckpointElementCount(const Shape& shape, uint64_t* count) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  uint64_t nonzero_product = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero_product > kMax / static_cast<uint64_t>(d)) return false;
    nonzero_product *= static_cast<uint64_t>(d);
  }
  *count = empty ? 0 : nonzero_product;
  return true;
}

}  // namespace internal
}  // namespace tandem