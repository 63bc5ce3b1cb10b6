#include "tests/report/json_checker.h"

#include <cstdlib>
#include <set>

namespace tandem {
namespace testing {

const JsonValue* JsonValue::Find(const std::string& key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  bool Document(JsonValue* value, std::string* error) {
    SkipSpace();
    if (!Value(value, 0)) return Report(error);
    SkipSpace();
    if (pos_ != text_.size()) {
      Fail("unexpected text after the value");
      return Report(error);
    }
    return true;
  }

 private:
  bool Report(std::string* error) {
    if (error != nullptr) {
      *error = "invalid JSON at offset " + std::to_string(pos_) + ": " + message_ +
               " near '" + std::string(text_.substr(pos_, 30)) + "'";
    }
    return false;
  }
  bool Fail(const std::string& message) {
    if (message_.empty()) message_ = message;
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return Fail("unknown literal");
    pos_ += word.size();
    return true;
  }

  bool Value(JsonValue* v, int depth) {
    if (depth > 64) return Fail("nested too deeply");
    switch (Peek()) {
      case '{': return Object(v, depth);
      case '[': return Array(v, depth);
      case '"': v->kind = JsonValue::Kind::kString; return String(&v->string);
      case 't': v->kind = JsonValue::Kind::kBool; v->boolean = true; return Literal("true");
      case 'f': v->kind = JsonValue::Kind::kBool; v->boolean = false; return Literal("false");
      case 'n': v->kind = JsonValue::Kind::kNull; return Literal("null");
      default: v->kind = JsonValue::Kind::kNumber; return Number(&v->number);
    }
  }

  bool Object(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kObject;
    ++pos_;  // {
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return true;
    }
    std::set<std::string> keys;
    while (true) {
      SkipSpace();
      if (Peek() != '"') return Fail("expected a string key");
      std::string key;
      if (!String(&key)) return false;
      // RFC 8259 allows duplicates but readers disagree on them: reject.
      if (!keys.insert(key).second) return Fail("duplicate key \"" + key + "\"");
      SkipSpace();
      if (Peek() != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      JsonValue member;
      if (!Value(&member, depth + 1)) return false;
      v->object.emplace_back(std::move(key), std::move(member));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  bool Array(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kArray;
    ++pos_;  // [
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      JsonValue element;
      if (!Value(&element, depth + 1)) return false;
      v->array.push_back(std::move(element));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  static void AppendUtf8(unsigned code, std::string* out) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
    }
  }

  bool Hex4(unsigned* code) {
    if (pos_ + 4 > text_.size()) return Fail("short \\u escape");
    *code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      *code <<= 4;
      if (c >= '0' && c <= '9') *code |= c - '0';
      else if (c >= 'a' && c <= 'f') *code |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') *code |= c - 'A' + 10;
      else return Fail("bad hex digit in \\u escape");
    }
    return true;
  }

  bool String(std::string* out) {
    ++pos_;  // "
    while (true) {
      if (AtEnd()) return Fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        return Fail("raw control character in a string");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (AtEnd()) return Fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          unsigned code;
          if (!Hex4(&code)) return false;
          if (code >= 0xd800 && code < 0xdc00) {  // a surrogate pair
            unsigned low;
            if (text_.substr(pos_, 2) != "\\u") return Fail("lone high surrogate");
            pos_ += 2;
            if (!Hex4(&low) || low < 0xdc00 || low >= 0xe000) {
              return Fail("bad low surrogate");
            }
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code < 0xe000) {
            return Fail("lone low surrogate");
          }
          AppendUtf8(code, out);
          break;
        }
        default:
          --pos_;
          return Fail("unknown escape");
      }
    }
  }

  bool Digits() {
    const size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
    return pos_ > start;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else: no NaN,
  // no Infinity, no leading '+' or zeros, no bare '.'.
  bool Number(double* out) {
    const size_t start = pos_;
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
    } else if (Peek() >= '1' && Peek() <= '9') {
      Digits();
    } else {
      return Fail("expected a value");
    }
    if (Peek() == '.') {
      ++pos_;
      if (!Digits()) return Fail("expected digits after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!Digits()) return Fail("expected exponent digits");
    }
    const std::string number(text_.substr(start, pos_ - start));
    *out = std::strtod(number.c_str(), nullptr);
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string message_;
};

}  // namespace

bool ParseJson(std::string_view text, JsonValue* value, std::string* error) {
  *value = JsonValue();
  return Parser(text).Document(value, error);
}

}  // namespace testing
}  // namespace tandem
