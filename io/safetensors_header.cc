#include "io/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"

namespace tandem {
namespace internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxInteger = std::numeric_limits<int64_t>::max();

// The start of every error but those of invalid JSON, which name the byte.
std::string Malformed(const std::string& path) {
  return path + ": malformed safetensors header: ";
}

// Byte `at` of the header, for messages: "found 'x'", "found byte 0x0A".
std::string Found(const char* text, size_t size, size_t at) {
  if (at >= size) return "found the end of the header";
  const unsigned char c = static_cast<unsigned char>(text[at]);
  char found[32];
  std::snprintf(found, sizeof(found), c > 0x20 && c < 0x7F ? "found '%c'" : "found byte 0x%02X",
                c);
  return found;
}

// A parsed value, for messages: "a number (4)", "a string", "an array", "null".
std::string Describe(const Json& value) {
  if (value.is_null()) return "null";
  const std::string type = value.type_name();
  std::string out = (value.is_array() || value.is_object() ? "an " : "a ") + type;
  if (value.is_number() || value.is_boolean()) out += " (" + value.dump() + ")";
  return out;
}

// nlohmann's reason for a parse error, without its "[json.exception...]
// parse error at line 1, column 5: " prefix, and with the token in "last
// read: '...'" cut to 40 bytes (an unterminated string runs to the end of
// the header).
std::string Reason(const Json::exception& e) {
  std::string reason = e.what();
  size_t start = reason.find("] ");
  start = start == std::string::npos ? 0 : start + 2;
  if (reason.compare(start, 11, "parse error") == 0) {
    const size_t colon = reason.find(": ", start);
    if (colon != std::string::npos) start = colon + 2;
  }
  reason.erase(0, start);
  const size_t token = reason.find("last read: '");
  if (token != std::string::npos) {
    const size_t first = token + 12;
    size_t last = reason.rfind("'; expected");
    if (last == std::string::npos || last < first) last = reason.size() - 1;
    if (last > first + 40) reason.replace(first + 40, last - first - 40, "...");
  }
  return reason;
}

// nlohmann's parser callback, run as the JSON is read: refuses a key that
// an object repeats (nlohmann would keep the last), and nesting deeper than
// the format's (root, tensor, shape) before it is built.
class Guard {
 public:
  explicit Guard(const std::string& path) : path_(path) {}

  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      TANDEM_CHECK(depth <= 2) << Malformed(path_) << "the value of \"" << key_
                               << "\" nests deeper than a tensor's shape";
      if (event == Event::object_start) objects_.push_back({key_, {}});
    } else if (event == Event::object_end) {
      objects_.pop_back();
    } else if (event == Event::key) {
      key_ = parsed.get<std::string>();
      Object& object = objects_.back();
      TANDEM_CHECK(object.keys.insert(key_).second) << Malformed(path_) << Repeated(depth, object);
    }
    return true;
  }

 private:
  struct Object {
    std::string name;  // the key it is the value of
    std::set<std::string> keys;
  };

  std::string Repeated(int depth, const Object& object) const {
    if (depth == 1) {
      return key_ == "__metadata__" ? "\"__metadata__\" appears twice"
                                    : "tensor '" + key_ + "' appears twice";
    }
    if (depth == 2 && object.name == "__metadata__") {
      return "\"__metadata__\" key \"" + key_ + "\" appears twice";
    }
    if (depth == 2) return "tensor '" + object.name + "' has \"" + key_ + "\" twice";
    return "\"" + object.name + "\" has \"" + key_ + "\" twice";
  }

  const std::string& path_;
  std::vector<Object> objects_;  // those open where the parser is
  std::string key_;              // the last key read
};

// A non-negative integer of at most 2^63 - 1; `what` names it in errors.
uint64_t Integer(const Json& value, const std::string& what, const std::string& path) {
  TANDEM_CHECK(value.is_number()) << Malformed(path) << what << " is " << Describe(value)
                                  << ", not an integer";
  // nlohmann reads an integer too large for 64 bits as a double.
  const bool negative = value.is_number_float() ? value.get<double>() < 0
                                                : !value.is_number_unsigned();
  TANDEM_CHECK(!negative) << Malformed(path) << what << " is negative (" << value.dump() << ")";
  TANDEM_CHECK(value.is_number_unsigned() ? value.get<uint64_t>() <= kMaxInteger
                                          : value.get<double>() < 0x1p63)
      << Malformed(path) << what << " (" << value.dump() << ") is larger than 2^63 - 1";
  TANDEM_CHECK(value.is_number_unsigned())
      << Malformed(path) << what << " is " << value.dump()
      << ", not an integer (JSON without a fraction or an exponent)";
  return value.get<uint64_t>();
}

std::vector<uint64_t> Integers(const Json& value, const std::string& what,
                               const std::string& path) {
  TANDEM_CHECK(value.is_array()) << Malformed(path) << what << " is " << Describe(value)
                                 << ", not an array of integers";
  std::vector<uint64_t> integers;
  for (const Json& element : value) {
    integers.push_back(Integer(element, "an element of " + what, path));
  }
  return integers;
}

SafetensorsEntry Tensor(const std::string& name, const Json& value, const std::string& path) {
  const std::string tensor = "tensor '" + name + "'";
  TANDEM_CHECK(value.is_object()) << Malformed(path) << tensor << " is " << Describe(value)
                                  << ", not an object of dtype, shape and data_offsets";
  SafetensorsEntry entry;
  entry.name = name;
  for (const auto& item : value.items()) {
    const std::string& field = item.key();
    if (field == "dtype") {
      TANDEM_CHECK(item.value().is_string()) << Malformed(path) << "the dtype of " << tensor
                                             << " is " << Describe(item.value())
                                             << ", not a string";
      entry.dtype = item.value().get<std::string>();
    } else if (field == "shape") {
      for (uint64_t d : Integers(item.value(), "the shape of " + tensor, path)) {
        entry.shape.push_back(static_cast<int64_t>(d));  // d <= 2^63 - 1
      }
    } else {
      TANDEM_CHECK(field == "data_offsets")
          << Malformed(path) << tensor << " has an unknown field \"" << field
          << "\" (a tensor has exactly dtype, shape and data_offsets)";
      const std::vector<uint64_t> offsets =
          Integers(item.value(), "the data_offsets of " + tensor, path);
      TANDEM_CHECK(offsets.size() == 2) << Malformed(path) << "the data_offsets of " << tensor
                                        << " has " << offsets.size()
                                        << " elements; it is [begin, end]";
      entry.begin = offsets[0];
      entry.end = offsets[1];
    }
  }
  const bool has_dtype = value.contains("dtype"), has_shape = value.contains("shape"),
             has_offsets = value.contains("data_offsets");
  TANDEM_CHECK(has_dtype && has_shape && has_offsets)
      << Malformed(path) << tensor << " lacks" << (has_dtype ? "" : " \"dtype\"")
      << (has_shape ? "" : " \"shape\"") << (has_offsets ? "" : " \"data_offsets\"");
  return entry;
}

}  // namespace

SafetensorsHeader ParseSafetensorsHeader(const char* text, size_t size,
                                         const std::string& path) {
  const std::string at = path + ": malformed safetensors header at byte ";
  // The specification: the header MUST begin with '{' (no whitespace).
  TANDEM_CHECK(size > 0 && text[0] == '{')
      << at << "0: a header starts with '{', " << Found(text, size, 0)
      << " (is this a safetensors file?)";
  // It pads the header with spaces and allows nothing else after the '}';
  // nlohmann would take any JSON whitespace there, so the spaces are cut
  // off here and the rest is checked after parsing.
  size_t end = size;
  while (text[end - 1] == ' ') --end;
  // nlohmann's lexer reads a NUL byte between tokens as the end of the
  // input, which would let anything follow one.
  const char* nul = static_cast<const char*>(std::memchr(text, '\0', end));
  TANDEM_CHECK(nul == nullptr) << at << nul - text
                               << ": a NUL byte, which JSON text never holds";
  Json root;
  try {
    root = Json::parse(text, text + end, Guard(path));
  } catch (const Json::parse_error& e) {
    // e.byte counts from 1 and may point past the end; ours count from 0.
    TANDEM_CHECK(false) << at << (e.byte > 0 ? e.byte - 1 : 0) << ": " << Reason(e);
  } catch (const Json::exception& e) {  // a number too large for a double
    TANDEM_CHECK(false) << Malformed(path) << Reason(e);
  }
  if (text[end - 1] != '}') {  // the object ends earlier, then JSON whitespace
    size_t after = end;
    while (text[after - 1] != '}') --after;
    while (text[after] == ' ') ++after;
    TANDEM_CHECK(false) << at << after
                        << ": after the header's closing '}' come bytes other than spaces ("
                        << Found(text, size, after) << "); only spaces may pad the header";
  }

  SafetensorsHeader header;
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      TANDEM_CHECK(value.is_object()) << Malformed(path) << "\"__metadata__\" is "
                                      << Describe(value) << ", not an object of strings";
      for (const auto& [key, entry] : value.items()) {
        TANDEM_CHECK(entry.is_string())
            << Malformed(path) << "the value of \"__metadata__\" key \"" << key << "\" is "
            << Describe(entry) << ", not a string";
        header.metadata.emplace(key, entry.get<std::string>());
      }
    } else {
      TANDEM_CHECK(!name.empty()) << Malformed(path) << "a tensor has an empty name";
      header.tensors.push_back(Tensor(name, value, path));
    }
  }
  return header;
}

std::string SafetensorsHeaderJson(const SafetensorsHeader& header) {
  Json json = Json::object();
  if (!header.metadata.empty()) json["__metadata__"] = header.metadata;
  for (const SafetensorsEntry& e : header.tensors) {
    json[e.name] = {{"dtype", e.dtype},
                    {"shape", e.shape},
                    {"data_offsets", {e.begin, e.end}}};
  }
  return json.dump();
}

bool IsValidUtf8(const std::string& text) {
  try {
    Json(text).dump();  // nlohmann refuses to write a string that is not UTF-8
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

}  // namespace internal
}  // namespace tandem
