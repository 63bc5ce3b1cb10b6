// JSON for Tandem's reports (metrics log, Chrome traces), through
// nlohmann-json: flat objects of numbers and strings, written as compact
// text and read back.
//
//   std::string line = JsonText(JsonObject({{"step", 100}, {"loss", 0.53}},
//                                          {{"split", "train"}}));
//   // line == R"({"step":100,"loss":0.53,"split":"train"})"
//
// A number that is an integer is written as one (100, not 100.0); any other
// in the shortest form that reads back as the same double (0.53, not
// 0.53000000000000003), independent of the locale. JSON has no NaN or
// Infinity, so non-finite numbers are written as null.
#ifndef TANDEM_REPORT_JSON_H_
#define TANDEM_REPORT_JSON_H_

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

// Ordered key/value fields of a flat JSON object.
using NumberFields = std::vector<std::pair<std::string, double>>;
using StringFields = std::vector<std::pair<std::string, std::string>>;

// A JSON value whose objects keep their members in insertion order.
using Json = nlohmann::ordered_json;

// `value` as JSON: an integer where it is one of magnitude below 2^53 (-0
// included, as 0), null where it is NaN or infinite, a double otherwise.
Json JsonNumber(double value);

// {"k":number,...,"k":"string",...}: numbers first, then strings, each group
// in the order given. A key given twice keeps its first place and its last
// value.
Json JsonObject(const NumberFields& numbers, const StringFields& strings);

// `value` as compact JSON text (no spaces, no newline). Strings are written
// as UTF-8; a byte that is not part of valid UTF-8 becomes U+FFFD, so the
// text is always valid JSON.
std::string JsonText(const Json& value);

// Reads back a flat object of numbers, strings and nulls, such as
// JsonObject writes: numbers (null as NaN) into `numbers`, strings into
// `strings`, each group in document order. Returns false, leaving both
// unspecified, for anything else: nested values, true/false, malformed text.
//
//   NumberFields numbers;
//   StringFields strings;
//   ParseJsonObject(R"({"step":100,"loss":null,"split":"train"})", &numbers, &strings);
//   // numbers == {{"step", 100}, {"loss", NaN}}, strings == {{"split", "train"}}
bool ParseJsonObject(std::string_view text, NumberFields* numbers, StringFields* strings);

}  // namespace tandem

#endif  // TANDEM_REPORT_JSON_H_
