#include "io/safetensors_header.h"

#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace internal {
namespace {

constexpr uint64_t kMaxInteger = std::numeric_limits<int64_t>::max();

// The length (1 to 4) of the well-formed UTF-8 sequence at `p`, or 0.
size_t Utf8Length(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  uint32_t code, min;
  if ((c & 0xE0) == 0xC0) {
    n = 2, code = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, code = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, code = c & 0x07, min = 0x10000;
  } else {
    return 0;  // a continuation byte, or 0xF8 and above
  }
  if (n > left) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    code = (code << 6) | (p[i] & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  return code < min || code > 0x10FFFF || surrogate ? 0 : n;
}

void AppendUtf8(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A recursive-descent parser for the header's fixed grammar (see
// io/safetensors_header.h). Every read is bounds-checked against `size_`.
class Parser {
 public:
  Parser(const char* text, size_t size, const std::string& path)
      : text_(text), size_(size), path_(path) {}

  SafetensorsHeader Parse();

 private:
  // The start of every error: the file and the byte the problem is at.
  std::string At(size_t at) const {
    return path_ + ": malformed safetensors header at byte " +
           std::to_string(at) + ": ";
  }
  std::string At() const { return At(pos_); }
  // What stands at the current position, for "expected X, found Y".
  std::string Found() const {
    if (pos_ >= size_) return "found the end of the header";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    char text[32];
    std::snprintf(text, sizeof(text), c > 0x20 && c < 0x7F ? "found '%c'" : "found byte 0x%02X", c);
    return text;
  }
  void SkipSpace() {
    while (pos_ < size_ && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                            text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // Skips whitespace; then consumes `c` if it comes next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < size_ && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c, const std::string& context) {
    TANDEM_CHECK(Consume(c)) << At() << "expected '" << c << "' " << context
                             << ", " << Found();
  }

  std::string String(const std::string& what);
  void Escape(std::string& out);
  uint32_t Hex4();
  uint64_t Integer(const std::string& what);
  std::vector<uint64_t> Integers(const std::string& what);
  void Metadata(SafetensorsHeader& header);
  SafetensorsEntry Tensor(const std::string& name);

  const char* text_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

SafetensorsHeader Parser::Parse() {
  SafetensorsHeader header;
  // The specification: the header MUST begin with '{' (no whitespace).
  TANDEM_CHECK(size_ > 0 && text_[0] == '{')
      << At() << "a header starts with '{', " << Found()
      << " (is this a safetensors file?)";
  ++pos_;
  std::set<std::string> names;
  bool has_metadata = false;
  if (!Consume('}')) {
    do {
      SkipSpace();
      const size_t key_at = pos_;
      std::string key = String("a tensor name");
      Expect(':', "after \"" + key + "\"");
      if (key == "__metadata__") {
        TANDEM_CHECK(!has_metadata) << At(key_at) << "\"__metadata__\" appears twice";
        has_metadata = true;
        Metadata(header);
        continue;
      }
      TANDEM_CHECK(!key.empty()) << At(key_at) << "a tensor has an empty name";
      TANDEM_CHECK(names.insert(key).second)
          << At(key_at) << "tensor '" << key << "' appears twice";
      header.tensors.push_back(Tensor(key));
    } while (Consume(','));
    Expect('}', "or ',' after a member of the header");
  }
  // The specification pads the header with spaces, and allows nothing else.
  while (pos_ < size_ && text_[pos_] == ' ') ++pos_;
  TANDEM_CHECK(pos_ == size_)
      << At() << "after the header's closing '}' come bytes other than spaces ("
      << Found() << "); only spaces may pad the header";
  return header;
}

std::string Parser::String(const std::string& what) {
  SkipSpace();
  TANDEM_CHECK(pos_ < size_ && text_[pos_] == '"')
      << At() << "expected " << what << " (a string), " << Found();
  const size_t start = pos_++;
  std::string out;
  for (;;) {
    TANDEM_CHECK(pos_ < size_) << At(start) << "a string never ends";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c == '\\') {
      Escape(out);
      continue;
    }
    TANDEM_CHECK(c >= 0x20) << At() << "a raw control character in a string "
                            << "(" << Found() << "); JSON needs it escaped";
    const size_t n = Utf8Length(reinterpret_cast<const unsigned char*>(text_ + pos_),
                                size_ - pos_);
    TANDEM_CHECK(n > 0) << At() << "invalid UTF-8 in a string (" << Found() << ")";
    out.append(text_ + pos_, n);
    pos_ += n;
  }
}

void Parser::Escape(std::string& out) {
  const size_t start = pos_++;  // the backslash
  TANDEM_CHECK(pos_ < size_) << At(start) << "a string never ends";
  const char e = text_[pos_++];
  switch (e) {
    case '"': out += '"'; return;
    case '\\': out += '\\'; return;
    case '/': out += '/'; return;
    case 'b': out += '\b'; return;
    case 'f': out += '\f'; return;
    case 'n': out += '\n'; return;
    case 'r': out += '\r'; return;
    case 't': out += '\t'; return;
    case 'u': break;
    default:
      TANDEM_CHECK(false) << At(start) << "unknown escape '\\" << e
                          << "' in a string";
  }
  uint32_t code = Hex4();
  if (code >= 0xD800 && code <= 0xDBFF) {
    TANDEM_CHECK(size_ - pos_ >= 2 && text_[pos_] == '\\' && text_[pos_ + 1] == 'u')
        << At(start) << "\\u escape of a high surrogate not followed by a "
        << "low one (\\uDC00 to \\uDFFF)";
    pos_ += 2;
    const uint32_t low = Hex4();
    TANDEM_CHECK(low >= 0xDC00 && low <= 0xDFFF)
        << At(start) << "\\u escape of a high surrogate not followed by a "
        << "low one (\\uDC00 to \\uDFFF)";
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  } else {
    TANDEM_CHECK(code < 0xDC00 || code > 0xDFFF)
        << At(start) << "\\u escape of a low surrogate without a high one";
  }
  AppendUtf8(code, out);
}

uint32_t Parser::Hex4() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const int digit = pos_ < size_ ? HexDigit(text_[pos_]) : -1;
    TANDEM_CHECK(digit >= 0) << At() << "\\u needs 4 hex digits, " << Found();
    value = value * 16 + static_cast<uint32_t>(digit);
    ++pos_;
  }
  return value;
}

uint64_t Parser::Integer(const std::string& what) {
  SkipSpace();
  TANDEM_CHECK(pos_ >= size_ || text_[pos_] != '-')
      << At() << what << " is negative";
  TANDEM_CHECK(pos_ < size_ && IsDigit(text_[pos_]))
      << At() << "expected " << what << " (an integer), " << Found();
  const size_t start = pos_;
  uint64_t value = 0;
  while (pos_ < size_ && IsDigit(text_[pos_])) {
    const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
    TANDEM_CHECK(value <= (kMaxInteger - digit) / 10)
        << At(start) << what << " is larger than 2^63 - 1";
    value = value * 10 + digit;
    ++pos_;
  }
  TANDEM_CHECK(text_[start] != '0' || pos_ - start == 1)
      << At(start) << what << " has a leading zero, which JSON does not allow";
  TANDEM_CHECK(pos_ >= size_ || (text_[pos_] != '.' && text_[pos_] != 'e' &&
                                 text_[pos_] != 'E'))
      << At() << what << " must be an integer, " << Found();
  return value;
}

std::vector<uint64_t> Parser::Integers(const std::string& what) {
  Expect('[', "to start " + what + " (an array of integers)");
  std::vector<uint64_t> values;
  if (Consume(']')) return values;
  do {
    values.push_back(Integer("an element of " + what));
  } while (Consume(','));
  Expect(']', "or ',' in " + what);
  return values;
}

void Parser::Metadata(SafetensorsHeader& header) {
  Expect('{', "to start \"__metadata__\" (an object of strings)");
  if (Consume('}')) return;
  do {
    SkipSpace();
    const size_t key_at = pos_;
    std::string key = String("a \"__metadata__\" key");
    Expect(':', "after \"__metadata__\" key \"" + key + "\"");
    std::string value = String("the value of \"__metadata__\" key \"" + key + "\"");
    TANDEM_CHECK(header.metadata.emplace(key, std::move(value)).second)
        << At(key_at) << "\"__metadata__\" key \"" << key << "\" appears twice";
  } while (Consume(','));
  Expect('}', "or ',' after a \"__metadata__\" entry");
}

SafetensorsEntry Parser::Tensor(const std::string& name) {
  const std::string tensor = "tensor '" + name + "'";
  SafetensorsEntry entry;
  entry.name = name;
  Expect('{', "to start " + tensor + " (an object)");
  bool has_dtype = false, has_shape = false, has_offsets = false;
  if (!Consume('}')) {
    do {
      SkipSpace();
      const size_t at = pos_;
      const std::string field = String("a field name of " + tensor);
      Expect(':', "after \"" + field + "\" of " + tensor);
      bool* seen = field == "dtype"          ? &has_dtype
                   : field == "shape"        ? &has_shape
                   : field == "data_offsets" ? &has_offsets
                                             : nullptr;
      TANDEM_CHECK(seen != nullptr)
          << At(at) << tensor << " has an unknown field \"" << field
          << "\" (a tensor has exactly dtype, shape and data_offsets)";
      TANDEM_CHECK(!*seen) << At(at) << tensor << " has \"" << field << "\" twice";
      *seen = true;
      if (field == "dtype") {
        entry.dtype = String("the dtype of " + tensor);
      } else if (field == "shape") {
        for (uint64_t d : Integers("the shape of " + tensor)) {
          entry.shape.push_back(static_cast<int64_t>(d));  // d <= 2^63 - 1
        }
      } else {
        const std::vector<uint64_t> offsets = Integers("the data_offsets of " + tensor);
        TANDEM_CHECK(offsets.size() == 2)
            << At() << "the data_offsets of " << tensor << " has "
            << offsets.size() << " elements; it is [begin, end]";
        entry.begin = offsets[0];
        entry.end = offsets[1];
      }
    } while (Consume(','));
    Expect('}', "or ',' after a field of " + tensor);
  }
  TANDEM_CHECK(has_dtype && has_shape && has_offsets)
      << At() << tensor << " lacks" << (has_dtype ? "" : " \"dtype\"")
      << (has_shape ? "" : " \"shape\"") << (has_offsets ? "" : " \"data_offsets\"");
  return entry;
}

}  // namespace

SafetensorsHeader ParseSafetensorsHeader(const char* text, size_t size,
                                         const std::string& path) {
  return Parser(text, size, path).Parse();
}

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof(escape), "\\u%04X", c);
          out += escape;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

bool IsValidUtf8(const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(p + i, text.size() - i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace internal
}  // namespace tandem
