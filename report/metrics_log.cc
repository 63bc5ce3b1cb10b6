#include "report/metrics_log.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/check.h"

namespace tandem {

MetricsLog::MetricsLog(const std::string& path, const std::string& flag, OpenMode mode)
    : path_(path), flag_(flag) {
  TANDEM_CHECK(!path_.empty()) << flag_ << " needs a file name";
  const bool append = mode == OpenMode::kAppend;
  // "a+": every write goes to the end, and the last byte can be read.
  file_.reset(std::fopen(path_.c_str(), append ? "a+" : "w"));
  TANDEM_CHECK(file_ != nullptr)
      << "cannot open " << flag_ << "=" << path_ << " for writing: "
      << std::strerror(errno) << "; check that the directory exists and is writable";
  if (append && std::fseek(file_.get(), -1, SEEK_END) == 0) {  // not empty
    const int last = std::fgetc(file_.get());
    std::fseek(file_.get(), 0, SEEK_END);  // C asks for a seek between a read and a write
    if (last != '\n') {
      TANDEM_CHECK(std::fputc('\n', file_.get()) != EOF && std::fflush(file_.get()) == 0)
          << "writing " << flag_ << "=" << path_ << " failed: " << std::strerror(errno);
    }
  }
}

void MetricsLog::Write(const NumberFields& numbers, const StringFields& strings) {
  std::string line = JsonText(JsonObject(numbers, strings));
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mutex_);
  // One fwrite of the whole line, then fflush: the line reaches the kernel
  // whole, so a crash after Write returns cannot lose or tear it.
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_.get()) == line.size() &&
                  std::fflush(file_.get()) == 0;
  TANDEM_CHECK(ok) << "writing " << flag_ << "=" << path_ << " failed: "
                   << std::strerror(errno);
  ++lines_;
}

int64_t MetricsLog::lines_written() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

double MetricsRow::Number(const std::string& key) const {
  for (const auto& [name, value] : numbers) {
    if (name == key) return value;
  }
  return std::nan("");
}

std::string MetricsRow::String(const std::string& key) const {
  for (const auto& [name, value] : strings) {
    if (name == key) return value;
  }
  return "";
}

std::vector<MetricsRow> ReadMetricsLog(const std::string& path, const std::string& flag) {
  std::vector<MetricsRow> rows;
  std::ifstream in(path);
  if (!in.is_open()) {
    TANDEM_CHECK(errno == ENOENT) << "cannot read " << flag << "=" << path << ": "
                                  << std::strerror(errno);
    return rows;
  }
  for (std::string line; std::getline(in, line);) {
    MetricsRow row;
    if (ParseJsonObject(line, &row.numbers, &row.strings)) rows.push_back(std::move(row));
  }
  TANDEM_CHECK(!in.bad()) << "reading " << flag << "=" << path << " failed";
  return rows;
}

}  // namespace tandem
