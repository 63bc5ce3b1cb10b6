// Training metrics as JSON Lines: one JSON object per line, appended and
// flushed as it is written, for scripts and dashboards (pandas.read_json(path,
// lines=True), jq).
//
//   MetricsLog metrics(config.metrics_path);   // throws naming --metrics
//   metrics.Write({{"epoch", 1}, {"step", 469}, {"loss", 0.53},
//                  {"accuracy", 0.81}, {"samples_per_second", 15000}},
//                 {{"split", "train"}});
//   // {"epoch":1,"step":469,"loss":0.53,"accuracy":0.81,"samples_per_second":15000,"split":"train"}
//
// Each line reaches the operating system before Write returns, so a run that
// crashes (or is killed) later loses none of them. JSON has no NaN or
// Infinity: a diverged loss is written as null. Thread-safe.
#ifndef TANDEM_REPORT_METRICS_LOG_H_
#define TANDEM_REPORT_METRICS_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "report/json.h"

namespace tandem {

class MetricsLog {
 public:
  // Creates (or truncates) `path`. Throws tandem::Error naming the path, the
  // flag it came from and the system's reason when it cannot be opened.
  explicit MetricsLog(const std::string& path, const std::string& flag = "--metrics");
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends one line: the numbers, then the strings, each in the order given.
  // Throws naming the path if the write fails (a full disk, say).
  void Write(const NumberFields& numbers, const StringFields& strings = {});

  const std::string& path() const { return path_; }
  int64_t lines_written() const;

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };

  std::string path_;
  std::string flag_;
  mutable std::mutex mutex_;
  std::unique_ptr<std::FILE, Closer> file_;
  int64_t lines_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_REPORT_METRICS_LOG_H_
