#include "tests/report/xml_checker.h"

#include <cstdlib>

namespace tandem {
namespace testing {

const std::string* XmlElement::Attribute(const std::string& key) const {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

void Collect(const XmlElement& e, const std::string& name,
             std::vector<const XmlElement*>* out) {
  if (e.name == name) out->push_back(&e);
  for (const XmlElement& child : e.children) Collect(child, name, out);
}

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  bool Document(XmlElement* root, std::string* error) {
    if (text_.substr(0, 5) == "<?xml") {
      const size_t end = text_.find("?>");
      if (end == std::string_view::npos) {
        Fail("unterminated XML declaration");
        return Report(error);
      }
      pos_ = end + 2;
    }
    if (!Misc() || Peek() != '<') {
      Fail("expected the root element");
      return Report(error);
    }
    if (!Element(root, 0) || !Misc()) return Report(error);
    if (pos_ != text_.size()) {
      Fail("content after the root element");
      return Report(error);
    }
    return true;
  }

 private:
  bool Report(std::string* error) {
    if (error != nullptr) {
      *error = "malformed XML at offset " + std::to_string(pos_) + ": " + message_ +
               " near '" + std::string(text_.substr(pos_, 40)) + "'";
    }
    return false;
  }
  bool Fail(const std::string& message) {
    if (message_.empty()) message_ = message;
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool StartsWith(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  void SkipSpace() {
    while (!AtEnd() && IsSpace(Peek())) ++pos_;
  }

  // Whitespace and comments, allowed around the root.
  bool Misc() {
    while (true) {
      SkipSpace();
      if (!StartsWith("<!--")) return true;
      if (!Comment()) return false;
    }
  }

  bool Comment() {
    const size_t end = text_.find("-->", pos_ + 4);
    if (end == std::string_view::npos) return Fail("unterminated comment");
    if (text_.substr(pos_ + 4, end - pos_ - 4).find("--") != std::string_view::npos) {
      return Fail("'--' inside a comment");
    }
    pos_ = end + 3;
    return true;
  }

  bool Name(std::string* name) {
    if (!IsNameStart(Peek())) return Fail("expected a name");
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    *name = std::string(text_.substr(start, pos_ - start));
    return true;
  }

  // After '&': one of the five predefined entities or a character reference.
  bool Reference(std::string* out) {
    const size_t end = text_.find(';', pos_);
    if (end == std::string_view::npos || end - pos_ > 10) {
      return Fail("'&' that starts no entity (write &amp;)");
    }
    const std::string_view ref = text_.substr(pos_, end - pos_);
    if (ref == "amp") *out += '&';
    else if (ref == "lt") *out += '<';
    else if (ref == "gt") *out += '>';
    else if (ref == "quot") *out += '"';
    else if (ref == "apos") *out += '\'';
    else if (ref.size() > 1 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string digits(ref.substr(hex ? 2 : 1));
      char* stop = nullptr;
      const long code = std::strtol(digits.c_str(), &stop, hex ? 16 : 10);
      if (digits.empty() || *stop != '\0' || code <= 0 || code > 0x10ffff) {
        return Fail("bad character reference");
      }
      if (code < 0x20 && code != 0x9 && code != 0xa && code != 0xd) {
        return Fail("character reference to a control character");
      }
      *out += code < 0x80 ? static_cast<char>(code) : '?';
    } else {
      return Fail("unknown entity &" + std::string(ref) + ";");
    }
    pos_ = end + 1;
    return true;
  }

  bool CheckChar(char c) {
    if (static_cast<unsigned char>(c) < 0x20 && !IsSpace(c)) {
      return Fail("control character (not allowed in XML 1.0)");
    }
    return true;
  }

  bool Element(XmlElement* e, int depth) {
    if (depth > 256) return Fail("nested too deeply");
    ++pos_;  // <
    if (!Name(&e->name)) return false;
    // Attributes.
    while (true) {
      const bool spaced = IsSpace(Peek());
      SkipSpace();
      if (StartsWith("/>")) {
        pos_ += 2;
        return true;
      }
      if (Peek() == '>') {
        ++pos_;
        break;
      }
      if (!spaced) return Fail("expected whitespace before an attribute");
      std::string key;
      if (!Name(&key)) return false;
      if (e->Attribute(key) != nullptr) return Fail("duplicate attribute " + key);
      SkipSpace();
      if (Peek() != '=') return Fail("expected '=' after attribute " + key);
      ++pos_;
      SkipSpace();
      const char quote = Peek();
      if (quote != '"' && quote != '\'') return Fail("attribute value must be quoted");
      ++pos_;
      std::string value;
      while (true) {
        if (AtEnd()) return Fail("unterminated attribute value");
        const char c = text_[pos_];
        if (c == quote) break;
        if (c == '<') return Fail("'<' in an attribute value");
        if (!CheckChar(c)) return false;
        ++pos_;
        if (c == '&') {
          if (!Reference(&value)) return false;
        } else {
          value += c;
        }
      }
      ++pos_;  // closing quote
      e->attributes.emplace_back(std::move(key), std::move(value));
    }
    // Content.
    while (true) {
      if (AtEnd()) return Fail("unclosed element <" + e->name + ">");
      const char c = Peek();
      if (StartsWith("</")) {
        pos_ += 2;
        std::string name;
        if (!Name(&name)) return false;
        if (name != e->name) {
          return Fail("</" + name + "> closes <" + e->name + ">");
        }
        SkipSpace();
        if (Peek() != '>') return Fail("expected '>'");
        ++pos_;
        return true;
      }
      if (StartsWith("<!--")) {
        if (!Comment()) return false;
      } else if (StartsWith("<![CDATA[")) {
        const size_t end = text_.find("]]>", pos_);
        if (end == std::string_view::npos) return Fail("unterminated CDATA");
        e->text += std::string(text_.substr(pos_ + 9, end - pos_ - 9));
        pos_ = end + 3;
      } else if (c == '<') {
        e->children.emplace_back();
        if (!Element(&e->children.back(), depth + 1)) return false;
      } else if (c == '&') {
        ++pos_;
        if (!Reference(&e->text)) return false;
      } else {
        if (StartsWith("]]>")) return Fail("']]>' in text");
        if (!CheckChar(c)) return false;
        e->text += c;
        ++pos_;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string message_;
};

}  // namespace

std::vector<const XmlElement*> XmlElement::FindAll(const std::string& key) const {
  std::vector<const XmlElement*> out;
  Collect(*this, key, &out);
  return out;
}

bool ParseXml(std::string_view text, XmlElement* root, std::string* error) {
  *root = XmlElement();
  return Parser(text).Document(root, error);
}

}  // namespace testing
}  // namespace tandem
