// Small helpers shared by the benchmarks: medians, comma-separated flag
// lists, and result rows printed both as machine-readable "key=value" lines
// and as an aligned table for people.
//
//   bench::Row row("result");
//   row.Add("mode", "threads").Add("workers", 2).Add("step_ms", 12.345, 3);
//   std::cout << row.KeyValues() << "\n";
//   // result mode=threads workers=2 step_ms=12.345
//   bench::PrintTable({row}, {"mode", "workers", "step_ms"}, std::cout);
//
// Every benchmark prints one "result ..." line per configuration, so a script
// can collect them with `grep '^result '` and split on spaces and '='.
#ifndef TANDEM_BENCH_BENCH_UTIL_H_
#define TANDEM_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tandem {
namespace bench {

// The median of `values` (the mean of the middle two for an even count);
// NaN for an empty vector.
double Median(std::vector<double> values);

// "1,2,4" -> {1, 2, 4}; errors name `flag`.
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& flag);
std::vector<double> ParseDoubleList(const std::string& text, const std::string& flag);

// Fixed-point text of `value` with `decimals` digits after the point.
std::string Fixed(double value, int decimals);

// One configuration's results: ordered (key, value) pairs. Values are text
// without spaces, so "key=value" lines split cleanly.
class Row {
 public:
  explicit Row(std::string tag = "result") : tag_(std::move(tag)) {}

  Row& Add(const std::string& key, const std::string& value);
  Row& Add(const std::string& key, const char* value) {
    return Add(key, std::string(value));
  }
  Row& Add(const std::string& key, int64_t value);
  Row& Add(const std::string& key, int value) {
    return Add(key, static_cast<int64_t>(value));
  }
  Row& Add(const std::string& key, double value, int decimals);

  // The value of `key`, or "-" if the row has none.
  std::string Get(const std::string& key) const;
  // "<tag> k1=v1 k2=v2 ..."
  std::string KeyValues() const;

 private:
  std::string tag_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

// An aligned table of `columns` (keys of the rows), one line per row, with a
// header line of the column names.
void PrintTable(const std::vector<Row>& rows,
                const std::vector<std::string>& columns, std::ostream& out);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_BENCH_UTIL_H_
