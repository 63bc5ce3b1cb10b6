#include "report/json.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace tandem {

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

}  // namespace tandem
