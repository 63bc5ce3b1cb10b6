// The safetensors file: encoding, validating decoding, atomic write.
// Parameters of a model: io/safetensors_model.cc; the JSON header:
// io/safetensors_header.cc.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "core/check.h"
#include "io/atomic_file.h"
#include "io/safetensors_header.h"

namespace tandem {
namespace {

constexpr size_t kLengthBytes = 8;
// The reference implementation refuses larger headers; so does this one, so
// that no file it writes is refused elsewhere.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
  const char* name;
  size_t bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8},  {"I64", 8},     {"U64", 8},
};

std::string KnownDTypes() {
  std::string names;
  for (const DTypeInfo& d : kDTypes) names += std::string(names.empty() ? "" : ", ") + d.name;
  return names;
}

uint64_t LoadLittle(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

void StoreLittle(uint64_t v, int bytes, uint8_t* p) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>((v >> (8 * i)) & 0xFF);
}

// The element count of `shape` times `element_bytes`, or false when a
// dimension is negative or the product passes 2^63 - 1. A dimension of 0
// makes the size 0 whatever the others are.
bool ByteSize(const Shape& shape, size_t element_bytes, uint64_t* bytes) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    empty = empty || d == 0;
  }
  uint64_t product = element_bytes;
  for (int64_t d : shape) {
    if (empty) break;
    if (product > kMax / static_cast<uint64_t>(d)) return false;
    product *= static_cast<uint64_t>(d);
  }
  *bytes = empty ? 0 : product;
  return true;
}

// Checks that the reader would accept what the writer is given.
void ValidateForWrite(const std::map<std::string, SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      const std::string& context) {
  for (const auto& [name, t] : tensors) {
    TANDEM_CHECK(!name.empty() && name != "__metadata__")
        << context << ": a tensor may not be named '" << name << "'";
    TANDEM_CHECK(internal::IsValidUtf8(name))
        << context << ": tensor name '" << name << "' is not valid UTF-8";
    const size_t element_bytes = SafetensorsDTypeSize(t.dtype);
    TANDEM_CHECK(element_bytes > 0)
        << context << ": tensor '" << name << "' has dtype '" << t.dtype
        << "', which is none of " << KnownDTypes();
    uint64_t bytes = 0;
    TANDEM_CHECK(ByteSize(t.shape, element_bytes, &bytes))
        << context << ": tensor '" << name << "' has shape "
        << ShapeToString(t.shape)
        << ": dimensions must be >= 0 and the size below 2^63 bytes";
    TANDEM_CHECK(bytes == t.data.size())
        << context << ": tensor '" << name << "' is " << t.dtype << " "
        << ShapeToString(t.shape) << " (" << bytes << " bytes) but holds "
        << t.data.size() << " bytes";
  }
  for (const auto& [key, value] : metadata) {
    TANDEM_CHECK(internal::IsValidUtf8(key) && internal::IsValidUtf8(value))
        << context << ": metadata \"" << key << "\" is not valid UTF-8";
  }
}

// The length field and the JSON header, padded with spaces to a multiple
// of 8 so that the data starts 8-byte aligned; tensors follow in name order.
// Errors start with `context`.
std::string EncodeHeader(const std::map<std::string, SafetensorsTensor>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& context) {
  internal::SafetensorsHeader header;
  header.metadata = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header.tensors.push_back({name, t.dtype, t.shape, offset, offset + t.data.size()});
    offset += t.data.size();
  }
  std::string json = internal::SafetensorsHeaderJson(header);
  json.append((8 - json.size() % 8) % 8, ' ');
  TANDEM_CHECK(json.size() <= kMaxHeaderBytes)
      << context << ": the header would be " << json.size()
      << " bytes, more than readers accept (" << kMaxHeaderBytes << ")";
  std::string out(kLengthBytes, '\0');
  StoreLittle(json.size(), kLengthBytes, reinterpret_cast<uint8_t*>(&out[0]));
  return out + json;
}

// Checks each tensor of the header against the data ([0, data_bytes) after
// the header) and then that together they cover it exactly.
void CheckLayout(const internal::SafetensorsHeader& header, uint64_t data_bytes,
                 const std::string& name) {
  for (const internal::SafetensorsEntry& e : header.tensors) {
    const std::string tensor = name + ": tensor '" + e.name + "'";
    const size_t element_bytes = SafetensorsDTypeSize(e.dtype);
    TANDEM_CHECK(element_bytes > 0)
        << tensor << " has dtype '" << e.dtype << "', which is none of "
        << KnownDTypes();
    uint64_t bytes = 0;
    TANDEM_CHECK(ByteSize(e.shape, element_bytes, &bytes))
        << tensor << " has shape " << ShapeToString(e.shape)
        << ", whose size passes 2^63 bytes";
    TANDEM_CHECK(e.begin <= e.end)
        << tensor << " has data_offsets [" << e.begin << ", " << e.end
        << "]: begin after end";
    TANDEM_CHECK(e.end <= data_bytes)
        << tensor << " has data_offsets [" << e.begin << ", " << e.end
        << "], past the end of the data (" << data_bytes
        << " bytes after the header); is the file truncated?";
    TANDEM_CHECK(e.end - e.begin == bytes)
        << tensor << " is " << e.dtype << " " << ShapeToString(e.shape) << " ("
        << bytes << " bytes) but its data_offsets [" << e.begin << ", "
        << e.end << "] hold " << e.end - e.begin << " bytes";
  }
  std::vector<const internal::SafetensorsEntry*> by_offset;
  for (const internal::SafetensorsEntry& e : header.tensors) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;  // the data before it belongs to the tensors seen
  const internal::SafetensorsEntry* previous = nullptr;
  for (const internal::SafetensorsEntry* e : by_offset) {
    TANDEM_CHECK(e->begin >= covered)
        << name << ": tensors '" << previous->name << "' [" << previous->begin
        << ", " << previous->end << ") and '" << e->name << "' [" << e->begin
        << ", " << e->end << ") overlap";
    TANDEM_CHECK(e->begin == covered)
        << name << ": bytes [" << covered << ", " << e->begin
        << ") of the data belong to no tensor (a gap before '" << e->name << "')";
    covered = e->end;
    previous = e;
  }
  TANDEM_CHECK(covered == data_bytes)
      << name << ": " << data_bytes - covered << " trailing bytes after the "
      << "last tensor's data (the header's tensors end at byte " << covered
      << " of the " << data_bytes << " after it)";
}

// Writes `header` and then each tensor's data, atomically (Note [Atomic
// replace] in io/atomic_file.cc): `path` holds the old file or the new one,
// never a mixture.
void WriteAtomically(const std::string& path, const std::string& header,
                     const std::map<std::string, SafetensorsTensor>& tensors) {
  WriteFileAtomically(path, "writing safetensors " + path, [&](const ByteSink& write) {
    write(header.data(), header.size());
    for (const auto& entry : tensors) {
      write(reinterpret_cast<const char*>(entry.second.data.data()), entry.second.data.size());
    }
  });
}

}  // namespace

size_t SafetensorsDTypeSize(const std::string& dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

SafetensorsTensor SafetensorsFromFloats(const std::vector<float>& values,
                                        const Shape& shape, DType dtype) {
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == NumElements(shape))
      << "SafetensorsFromFloats: shape " << ShapeToString(shape) << " needs "
      << NumElements(shape) << " values, got " << values.size();
  SafetensorsTensor t;
  t.shape = shape;
  const bool bf16 = dtype == DType::kBFloat16;
  t.dtype = bf16 ? "BF16" : "F32";
  t.data.resize(values.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < values.size(); ++i) {
    if (bf16) {
      StoreLittle(FloatToBFloat16Bits(values[i]), 2, &t.data[2 * i]);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &values[i], sizeof(bits));
      StoreLittle(bits, 4, &t.data[4 * i]);
    }
  }
  return t;
}

std::vector<float> SafetensorsToFloats(const SafetensorsTensor& tensor) {
  const bool bf16 = tensor.dtype == "BF16";
  TANDEM_CHECK(bf16 || tensor.dtype == "F32")
      << "SafetensorsToFloats: dtype " << tensor.dtype
      << " is neither F32 nor BF16";
  const size_t element_bytes = bf16 ? 2 : 4;
  uint64_t bytes = 0;
  TANDEM_CHECK(ByteSize(tensor.shape, element_bytes, &bytes) && bytes == tensor.data.size())
      << "SafetensorsToFloats: " << tensor.dtype << " " << ShapeToString(tensor.shape)
      << " does not match its " << tensor.data.size() << " bytes";
  std::vector<float> values(tensor.data.size() / element_bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t* p = &tensor.data[element_bytes * i];
    if (bf16) {
      values[i] = BFloat16BitsToFloat(static_cast<uint16_t>(LoadLittle(p, 2)));
    } else {
      const uint32_t bits = static_cast<uint32_t>(LoadLittle(p, 4));
      std::memcpy(&values[i], &bits, sizeof(bits));
    }
  }
  return values;
}

void WriteSafetensors(const std::string& path,
                      const std::map<std::string, SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string context = "writing safetensors " + path;
  ValidateForWrite(tensors, metadata, context);
  const std::string header = EncodeHeader(tensors, metadata, context);
  WriteAtomically(path, header, tensors);
}

SafetensorsFile ReadSafetensors(const std::string& path) {
  // O_NONBLOCK: a FIFO opens at once and the S_ISREG check refuses it (see
  // ReadCheckpoint); a regular file reads as without it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  TANDEM_CHECK(fd.get() >= 0) << path << ": cannot open safetensors file: " << Errno();
  struct stat info;
  TANDEM_CHECK(::fstat(fd.get(), &info) == 0)
      << path << ": cannot stat safetensors file: " << Errno();
  TANDEM_CHECK(S_ISREG(info.st_mode))
      << path << ": " << (S_ISDIR(info.st_mode) ? "is a directory" : "not a regular file")
      << ", expected a safetensors file";
  // The file's size bounds every allocation from here on.
  std::vector<uint8_t> bytes(static_cast<size_t>(info.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n >= 0) << path << ": cannot read safetensors file: " << Errno();
    if (n == 0) break;  // the file shrank while we read: decode what is there
    got += static_cast<size_t>(n);
  }
  return internal::DecodeSafetensors(bytes.data(), got, path);
}

namespace internal {

std::string EncodeSafetensors(const std::map<std::string, SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& name) {
  const std::string context = "writing safetensors " + name;
  ValidateForWrite(tensors, metadata, context);
  std::string out = EncodeHeader(tensors, metadata, context);
  for (const auto& entry : tensors) {
    out.append(reinterpret_cast<const char*>(entry.second.data.data()),
               entry.second.data.size());
  }
  return out;
}

SafetensorsFile DecodeSafetensors(const uint8_t* data, size_t size,
                                  const std::string& name) {
  TANDEM_CHECK(size >= kLengthBytes)
      << name << ": not a safetensors file: " << size << " bytes, too few for "
      << "the 8-byte header length";
  const uint64_t header_bytes = LoadLittle(data, kLengthBytes);
  TANDEM_CHECK(header_bytes <= size - kLengthBytes)
      << name << ": the header length is " << header_bytes << " bytes but only "
      << size - kLengthBytes << " follow it; truncated, or not a safetensors file";
  TANDEM_CHECK(header_bytes <= kMaxHeaderBytes)
      << name << ": the header length is " << header_bytes
      << " bytes, more than the " << kMaxHeaderBytes << " a safetensors header may have";
  const char* text = reinterpret_cast<const char*>(data + kLengthBytes);
  const internal::SafetensorsHeader header =
      internal::ParseSafetensorsHeader(text, static_cast<size_t>(header_bytes), name);
  const uint8_t* body = data + kLengthBytes + header_bytes;
  const uint64_t body_bytes = size - kLengthBytes - header_bytes;
  CheckLayout(header, body_bytes, name);
  SafetensorsFile file;
  file.metadata = header.metadata;
  for (const internal::SafetensorsEntry& e : header.tensors) {
    SafetensorsTensor& t = file.tensors[e.name];
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.data.assign(body + e.begin, body + e.end);
  }
  return file;
}

}  // namespace internal
}  // namespace tandem
