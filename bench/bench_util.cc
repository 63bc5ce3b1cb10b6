#include "bench/bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace bench {

int RunMain(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}

double Median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid]
                                : 0.5 * (values[mid - 1] + values[mid]);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::vector<int64_t> ParseIntList(const std::string& text, const std::string& flag) {
  std::vector<int64_t> values;
  for (const std::string& item : SplitList(text)) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    TANDEM_CHECK(*end == '\0' && v > 0)
        << flag << " must be positive integers separated by commas (e.g. 1,2,4), got '"
        << text << "'";
    values.push_back(v);
  }
  TANDEM_CHECK(!values.empty()) << flag << " is empty";
  return values;
}

std::vector<double> ParseDoubleList(const std::string& text, const std::string& flag) {
  std::vector<double> values;
  for (const std::string& item : SplitList(text)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    TANDEM_CHECK(*end == '\0' && v > 0 && std::isfinite(v))
        << flag << " must be positive numbers separated by commas (e.g. 1,4,25), got '"
        << text << "'";
    values.push_back(v);
  }
  TANDEM_CHECK(!values.empty()) << flag << " is empty";
  return values;
}

std::vector<int64_t> ParseMibAsFloats(const std::string& text, const std::string& flag) {
  std::vector<int64_t> counts;
  for (double mib : ParseDoubleList(text, flag)) {
    counts.push_back(static_cast<int64_t>(mib * (1 << 20) / 4));
  }
  return counts;
}

std::string Fixed(double value, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << value;
  return out.str();
}

Row& Row::Add(const std::string& key, const std::string& value) {
  TANDEM_CHECK(value.find(' ') == std::string::npos && !value.empty())
      << "result value for '" << key << "' must be one word, got '" << value << "'";
  fields_.emplace_back(key, value);
  return *this;
}

Row& Row::Add(const std::string& key, int64_t value) {
  return Add(key, std::to_string(value));
}

Row& Row::Add(const std::string& key, double value, int decimals) {
  return Add(key, Fixed(value, decimals));
}

std::string Row::Get(const std::string& key) const {
  for (const auto& field : fields_) {
    if (field.first == key) return field.second;
  }
  return "-";
}

std::string Row::KeyValues() const {
  std::string line = tag_;
  for (const auto& field : fields_) line += " " + field.first + "=" + field.second;
  return line;
}

void PrintTable(const std::vector<Row>& rows,
                const std::vector<std::string>& columns, std::ostream& out) {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].size();
    for (const Row& row : rows) width[c] = std::max(width[c], row.Get(columns[c]).size());
  }
  auto line = [&](auto cell) {
    for (size_t c = 0; c < columns.size(); ++c) {
      out << (c ? "  " : "") << std::setw(static_cast<int>(width[c])) << cell(c);
    }
    out << "\n";
  };
  line([&](size_t c) { return columns[c]; });
  for (const Row& row : rows) line([&](size_t c) { return row.Get(columns[c]); });
}

void ResultPrinter::Print(const Row& row) { PrintLine(row.KeyValues()); }

void ResultPrinter::PrintAndKeep(const Row& row) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << row.KeyValues() << std::endl;
  kept_.push_back(row);
}

void ResultPrinter::PrintLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << line << std::endl;
}

std::vector<Row> ResultPrinter::kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_;
}

void ResultPrinter::PrintTable(const std::vector<std::string>& columns,
                               const std::string& caption) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (kept_.empty()) return;
  out_ << "\n";
  if (!caption.empty()) out_ << caption << "\n";
  bench::PrintTable(kept_, columns, out_);
  out_.flush();
}

}  // namespace bench
}  // namespace tandem
