#include "bench/bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace bench {

double Median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid]
                                : 0.5 * (values[mid - 1] + values[mid]);
}

namespace {
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}
}  // namespace

std::vector<int64_t> ParseIntList(const std::string& text, const std::string& flag) {
  std::vector<int64_t> values;
  for (const std::string& item : SplitCommas(text)) {
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
  for (const std::string& item : SplitCommas(text)) {
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

}  // namespace bench
}  // namespace tandem
