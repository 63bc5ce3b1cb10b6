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
//
// A resumed run appends to the log it had and reads it back, e.g. to redraw
// its plot from the whole run:
//
//   MetricsLog metrics(path, "--metrics", MetricsLog::OpenMode::kAppend);
//   for (const MetricsRow& row : ReadMetricsLog(path)) {
//     if (row.String("split") == "train") losses.push_back(row.Number("loss"));
//   }
#ifndef TANDEM_REPORT_METRICS_LOG_H_
#define TANDEM_REPORT_METRICS_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "report/json.h"

namespace tandem {

class MetricsLog {
 public:
  enum class OpenMode {
    kTruncate,  // a new log: creates `path`, or empties it
    kAppend,    // continues the log at `path` (creating it if there is none)
  };

  // Opens `path`. Throws tandem::Error naming the path, the flag it came from
  // and the system's reason when it cannot be opened. Appending after a last
  // line left without its newline (a torn write) starts a new line first.
  explicit MetricsLog(const std::string& path, const std::string& flag = "--metrics",
                      OpenMode mode = OpenMode::kTruncate);
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

// One line of a metrics log, read back.
struct MetricsRow {
  NumberFields numbers;  // a null reads back as NaN
  StringFields strings;
  // The number named `key`; NaN when the row has none.
  double Number(const std::string& key) const;
  // The string named `key`; "" when the row has none.
  std::string String(const std::string& key) const;
};

// The rows of the log at `path`, in file order. No file: no rows. A line that
// is not a flat JSON object (a torn last line, text someone added) is
// skipped. Throws tandem::Error naming the path and `flag` when the file
// exists but cannot be read.
std::vector<MetricsRow> ReadMetricsLog(const std::string& path,
                                       const std::string& flag = "--metrics");

}  // namespace tandem

#endif  // TANDEM_REPORT_METRICS_LOG_H_
