// The JSON header of a safetensors file: a strict parser for exactly the
// JSON the format uses, and the writer's JSON. Private to //io:safetensors
// (io/safetensors.h is the interface).
//
// The parser accepts one object whose members are "__metadata__" (an object
// of strings) or tensors, each an object of exactly "dtype" (a string),
// "shape" (an array of integers) and "data_offsets" (an array of two
// integers), in any order, with JSON whitespace between tokens and spaces
// after the closing brace. Strings may hold any JSON escape (\uXXXX with
// surrogate pairs included) and must be valid UTF-8. Integers are
// non-negative, without sign, fraction, exponent or leading zeros, and at
// most 2^63 - 1. Anything else (another type, an unknown or repeated key, a
// repeated tensor name, trailing bytes) throws tandem::Error that starts
// "<path>: malformed safetensors header at byte K:". The grammar is flat
// (depth 2), so the parser does not recurse.
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

// `text` as a JSON string literal, quotes included: '"' and '\' escaped,
// control characters as \n, \t, ... or \u00XX, everything else as is.
std::string JsonQuote(const std::string& text);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(const std::string& text);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_IO_SAFETENSORS_HEADER_H_
