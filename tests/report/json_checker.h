// A strict JSON (RFC 8259) parser for tests of Tandem's JSON writers: what
// it accepts, jq, Python's json and chrome://tracing accept too. Test-only;
// Tandem itself only writes JSON.
//
//   JsonValue v;
//   std::string error;
//   ASSERT_TRUE(ParseJson(line, &v, &error)) << error;
//   EXPECT_EQ(v.Find("loss")->number, 0.53);
#ifndef TANDEM_TESTS_CORE_REPORT_JSON_CHECKER_H_
#define TANDEM_TESTS_CORE_REPORT_JSON_CHECKER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {
namespace testing {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;  // decoded (escapes resolved, \u as UTF-8)
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // in file order

  // The member `key` of an object, or nullptr.
  const JsonValue* Find(const std::string& key) const;
};

// Parses exactly one JSON value (surrounding whitespace allowed). On failure
// returns false and says where and why in `error`.
bool ParseJson(std::string_view text, JsonValue* value, std::string* error);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_CORE_REPORT_JSON_CHECKER_H_
