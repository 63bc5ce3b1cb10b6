// Small helpers shared by the benchmarks: the main() wrapper, medians,
// comma-separated flag lists, and result rows printed both as
// machine-readable "key=value" lines and as an aligned table for people.
//
//   int main(int argc, char** argv) {
//     CLI::App app{"..."};
//     CLI11_PARSE(app, argc, argv);
//     return bench::RunMain([&] {
//       bench::ResultPrinter results;
//       bench::Row row("result");
//       row.Add("mode", "threads").Add("workers", 2).Add("step_ms", 12.345, 3);
//       results.PrintAndKeep(row);  // result mode=threads workers=2 step_ms=12.345
//       results.PrintTable({"mode", "workers", "step_ms"});
//       return 0;
//     });
//   }
//
// Every benchmark prints one "result ..." line per configuration, so a script
// can collect them with `grep '^result '` and split on spaces and '='.
#ifndef TANDEM_BENCH_BENCH_UTIL_H_
#define TANDEM_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <iostream>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tandem {
namespace bench {

// A benchmark's main(): returns what `body` returns, or, when it throws,
// prints "error: <what>" to stderr and returns 1.
int RunMain(const std::function<int()>& body);

// The median of `values` (the mean of the middle two for an even count);
// NaN for an empty vector.
double Median(std::vector<double> values);

// "a,b,c" -> {"a", "b", "c"}; empty items are dropped.
std::vector<std::string> SplitList(const std::string& text);
// "1,2,4" -> {1, 2, 4}; errors name `flag`.
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& flag);
std::vector<double> ParseDoubleList(const std::string& text, const std::string& flag);
// Buffer sizes in MiB, "16,64,0.02" -> the floats each holds (rounded down);
// errors name `flag`.
std::vector<int64_t> ParseMibAsFloats(const std::string& text, const std::string& flag);

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

// Where a benchmark's rows go: each is printed as its "key=value" line at
// once and flushed (a run cut off by a timeout keeps what it printed), and
// the rows meant for the closing table are kept. Thread-safe, so the workers
// of Launch may print.
class ResultPrinter {
 public:
  explicit ResultPrinter(std::ostream& out = std::cout) : out_(out) {}

  // The row's line only.
  void Print(const Row& row);
  // The row's line, and the row kept for PrintTable.
  void PrintAndKeep(const Row& row);
  // Any other line (a trace, a failure with a quoted reason).
  void PrintLine(const std::string& line);

  std::vector<Row> kept() const;
  // A blank line, `caption` (when not empty) on a line of its own, then the
  // aligned table of the kept rows' `columns`. Nothing when no row was kept.
  void PrintTable(const std::vector<std::string>& columns,
                  const std::string& caption = "") const;

 private:
  std::ostream& out_;
  mutable std::mutex mu_;
  std::vector<Row> kept_;
};

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_BENCH_BENCH_UTIL_H_
