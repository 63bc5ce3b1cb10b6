// The JSON header of a safetensors file, read and written with
// nlohmann-json. Private to //io:safetensors (io/safetensors.h is the
// interface).
//
// The parser accepts one object whose members are "__metadata__" (an object
// of strings) or tensors, each an object of exactly "dtype" (a string),
// "shape" (an array of integers) and "data_offsets" (an array of two
// integers), in any order. The header starts with '{' and may end with
// spaces after the closing brace, nothing else (the specification's
// padding). Strings must be valid UTF-8, escapes included; integers are
// non-negative, without fraction or exponent, and at most 2^63 - 1; no
// object repeats a key (nlohmann alone would keep the last); nothing nests
// deeper than a tensor's arrays. Anything else throws tandem::Error that
// starts "<path>: malformed safetensors header" and says what is wrong: for
// invalid JSON, the byte of the header and nlohmann's reason; otherwise the
// tensor or key at fault.
#ifndef TANDEM_IO_SAFETENSORS_HEADER_H_
#define TANDEM_IO_SAFETENSORS_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem {
namespace internal {

// One tensor as the header describes it; io/safetensors.cc checks it
// against the data.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
};

// Parses the `size` bytes of a header; errors start with `path`.
SafetensorsHeader ParseSafetensorsHeader(const char* text, size_t size,
                                         const std::string& path);

// The header as compact JSON, unpadded: "__metadata__" first unless it is
// empty, then the tensors in their order. Every name, dtype and metadata
// string must be valid UTF-8 (IsValidUtf8).
std::string SafetensorsHeaderJson(const SafetensorsHeader& header);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(const std::string& text);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_IO_SAFETENSORS_HEADER_H_
