#include "tests/report/json_checker.h"

#include <set>
#include <vector>

namespace tandem {
namespace testing {

bool ParseJson(std::string_view text, nlohmann::ordered_json* value, std::string* error) {
  using Json = nlohmann::ordered_json;
  std::vector<std::set<std::string>> keys;  // of each object open at this point
  std::string repeated;                     // the first key seen twice
  auto reject_repeats = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == Json::parse_event_t::key && repeated.empty() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  // nlohmann's lexer reads a NUL byte between tokens as the end of the
  // input; JSON text never holds one.
  if (text.find('\0') != std::string_view::npos) {
    *error = "invalid JSON: a NUL byte at offset " + std::to_string(text.find('\0'));
    return false;
  }
  try {
    *value = Json::parse(text, reject_repeats);
  } catch (const Json::exception& e) {
    *error = std::string("invalid JSON: ") + e.what();
    return false;
  }
  if (!repeated.empty()) {
    *error = "invalid JSON: duplicate key \"" + repeated + "\"";
    return false;
  }
  return true;
}

}  // namespace testing
}  // namespace tandem
