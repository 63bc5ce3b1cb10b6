// Strict JSON (RFC 8259) for tests of Tandem's JSON writers, read with
// nlohmann-json: what it accepts, jq, Python's json and chrome://tracing
// accept too. Stricter than nlohmann's default in two ways: a key that
// appears twice in an object is an error (readers disagree on which one
// counts), and so is a NUL byte (nlohmann takes one for the end of the text).
//
//   nlohmann::ordered_json v;
//   std::string error;
//   ASSERT_TRUE(ParseJson(line, &v, &error)) << error;
//   EXPECT_EQ(v.at("loss").get<double>(), 0.53);
#ifndef TANDEM_TESTS_REPORT_JSON_CHECKER_H_
#define TANDEM_TESTS_REPORT_JSON_CHECKER_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tandem {
namespace testing {

// Parses exactly one JSON value (surrounding whitespace allowed) into
// `value`, objects in document order. On failure returns false and says
// where and why in `error`.
bool ParseJson(std::string_view text, nlohmann::ordered_json* value, std::string* error);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_REPORT_JSON_CHECKER_H_
