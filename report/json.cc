#include "report/json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace tandem {

namespace {

// A cursor over the text ParseJsonObject reads; each method consumes what it
// recognises and returns false, consuming an unspecified amount, otherwise.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool Eat(char c) {
    if (Peek() != c || c == '\0') return false;
    ++pos_;
    return true;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  bool Literal(std::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool String(std::string* out);
  bool Number(double* out);

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Hex4(unsigned* code);
  size_t Digits() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ - start;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

bool Reader::Hex4(unsigned* code) {
  if (pos_ + 4 > text_.size()) return false;
  *code = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = text_[pos_++];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return false;
    *code = *code * 16 + static_cast<unsigned>(digit);
  }
  return true;
}

void AppendUtf8(unsigned code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

bool Reader::String(std::string* out) {
  if (!Eat('"')) return false;
  out->clear();
  while (pos_ < text_.size()) {
    const char c = text_[pos_++];
    if (c == '"') return true;
    if (static_cast<unsigned char>(c) < 0x20) return false;  // must be escaped
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    if (pos_ == text_.size()) return false;
    switch (const char e = text_[pos_++]) {
      case '"': case '\\': case '/': out->push_back(e); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        unsigned code = 0;
        if (!Hex4(&code) || (code >= 0xDC00 && code < 0xE000)) return false;
        if (code >= 0xD800 && code < 0xDC00) {  // a surrogate pair
          unsigned low = 0;
          if (text_.substr(pos_, 2) != "\\u") return false;
          pos_ += 2;
          if (!Hex4(&low) || low < 0xDC00 || low >= 0xE000) return false;
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        AppendUtf8(code, out);
        break;
      }
      default: return false;
    }
  }
  return false;  // no closing quote
}

// JSON's number grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// checked here; from_chars alone would also take "inf", "nan" and "01".
bool Reader::Number(double* out) {
  SkipSpace();
  const size_t start = pos_;
  if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
  const size_t int_start = pos_;
  const size_t int_digits = Digits();
  if (int_digits == 0 || (int_digits > 1 && text_[int_start] == '0')) return false;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (Digits() == 0) return false;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (Digits() == 0) return false;
  }
  const char* first = text_.data() + start;
  const char* last = text_.data() + pos_;
  const std::from_chars_result r = std::from_chars(first, last, *out);
  // Out of range ("1e999") is still a number: JSON has no limit.
  if (r.ec == std::errc::result_out_of_range) {
    *out = *first == '-' ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
    return true;
  }
  return r.ec == std::errc() && r.ptr == last;
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[(c >> 4) & 0xf]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendJsonNumber(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  if (value == 0) value = 0.0;  // "-0" is valid JSON but reads as a bug in a log
  // Shortest round-trip form; to_chars never uses the locale's decimal comma,
  // and its exponents ("1e-07", "1e+21") are valid JSON.
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (r.ec != std::errc()) {  // cannot happen for 32 bytes; stay valid JSON
    out->append("null");
    return;
  }
  out->append(buffer, r.ptr);
}

void AppendJsonObject(const NumberFields& numbers, const StringFields& strings,
                      std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [key, value] : numbers) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(key, out);
    out->push_back(':');
    AppendJsonNumber(value, out);
  }
  for (const auto& [key, value] : strings) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(key, out);
    out->push_back(':');
    AppendJsonString(value, out);
  }
  out->push_back('}');
}

bool ParseJsonObject(std::string_view text, NumberFields* numbers, StringFields* strings) {
  numbers->clear();
  strings->clear();
  Reader in(text);
  if (!in.Eat('{')) return false;
  if (in.Eat('}')) return in.AtEnd();
  do {
    std::string key;
    if (!in.String(&key) || !in.Eat(':')) return false;
    const char next = in.Peek();
    if (next == '"') {
      std::string value;
      if (!in.String(&value)) return false;
      strings->emplace_back(std::move(key), std::move(value));
    } else if (next == 'n') {
      if (!in.Literal("null")) return false;
      numbers->emplace_back(std::move(key), std::nan(""));
    } else {
      double value = 0;
      if (!in.Number(&value)) return false;
      numbers->emplace_back(std::move(key), value);
    }
  } while (in.Eat(','));
  return in.Eat('}') && in.AtEnd();
}

}  // namespace tandem
