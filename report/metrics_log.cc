#include "report/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace tandem {

MetricsLog::MetricsLog(const std::string& path, const std::string& flag)
    : path_(path), flag_(flag) {
  TANDEM_CHECK(!path_.empty()) << flag_ << " needs a file name";
  file_.reset(std::fopen(path_.c_str(), "w"));
  TANDEM_CHECK(file_ != nullptr)
      << "cannot open " << flag_ << "=" << path_ << " for writing: "
      << std::strerror(errno) << "; check that the directory exists and is writable";
}

void MetricsLog::Write(const NumberFields& numbers, const StringFields& strings) {
  std::string line;
  AppendJsonObject(numbers, strings, &line);
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

}  // namespace tandem
