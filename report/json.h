// JSON text for Tandem's reports (metrics log, Chrome traces): just enough to
// write flat objects correctly, and to read them back, with no third-party
// dependency.
//
//   std::string line;
//   AppendJsonObject({{"step", 100}, {"loss", 0.53}}, {{"split", "train"}}, &line);
//   // line == R"({"step":100,"loss":0.53,"split":"train"})"
//
// Numbers are written in the shortest form that reads back as the same double
// (100 not 100.0, 0.53 not 0.53000000000000003), independent of the locale.
// JSON has no NaN or Infinity, so non-finite numbers are written as null.
#ifndef TANDEM_REPORT_JSON_H_
#define TANDEM_REPORT_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

// Ordered key/value fields of a flat JSON object.
using NumberFields = std::vector<std::pair<std::string, double>>;
using StringFields = std::vector<std::pair<std::string, std::string>>;

// Appends `text` as a quoted JSON string: quotes, backslashes and control
// characters are escaped; other bytes (UTF-8) pass through.
void AppendJsonString(std::string_view text, std::string* out);

// Appends a number, or null where `value` is NaN or infinite.
void AppendJsonNumber(double value, std::string* out);

// Appends {"k":number,...,"k":"string",...}: numbers first, then strings,
// each group in the order given.
void AppendJsonObject(const NumberFields& numbers, const StringFields& strings,
                      std::string* out);

// Reads back a flat object of numbers, strings and nulls, such as
// AppendJsonObject writes: numbers (null as NaN) into `numbers`, strings into
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
