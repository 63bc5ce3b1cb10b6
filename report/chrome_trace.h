// A timeline of what each worker did, for chrome://tracing and Perfetto
// (ui.perfetto.dev): Trace Event Format "complete" events, one row per
// (worker, activity), written as {"traceEvents":[...],"displayTimeUnit":"ms"}.
//
//   ChromeTrace trace;                          // time 0 is now (steady clock)
//   trace.SetProcessName(0, "worker 0");
//   trace.SetThreadName(0, 0, "compute");
//   trace.SetThreadName(0, 1, "communication");
//   trace.AddComplete("backward fc2", "compute", /*pid=*/0, /*tid=*/0, begin, end);
//   trace.AddComplete("all-reduce bucket 0", "comm", 0, 1, t0, t1,
//                     {{"bucket", 0}, {"bytes", 4194304}});
//   trace.Write(config.trace_path);             // throws naming --trace
//
// Timestamps are microseconds since the trace's start, as doubles (sub-µs
// resolution survives). Every Add is thread-safe, so each worker thread may
// record its own events. A trace keeps at most `max_events` events and counts
// the rest as dropped (written under "otherData"), so a long run cannot
// exhaust memory: trace a window of steps, not a whole run.
#ifndef TANDEM_REPORT_CHROME_TRACE_H_
#define TANDEM_REPORT_CHROME_TRACE_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "report/json.h"

namespace tandem {

class ChromeTrace {
 public:
  using Clock = std::chrono::steady_clock;

  // Time 0 of the trace is `start` (default: now).
  explicit ChromeTrace(Clock::time_point start = Clock::now(),
                       int64_t max_events = 1000000);
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  // Row labels. A process is a worker (pid = rank), a thread one of its rows
  // (e.g. tid 0 = compute, 1 = communication); rows sort by these ids.
  void SetProcessName(int pid, const std::string& name);
  void SetThreadName(int pid, int tid, const std::string& name);

  // An event from `begin` to `end` on the steady clock (ReducerTimeline's
  // clock). `args` and `string_args` show in the viewer's details pane.
  void AddComplete(const std::string& name, const std::string& category, int pid,
                   int tid, Clock::time_point begin, Clock::time_point end,
                   const NumberFields& args = {}, const StringFields& string_args = {});
  // The same, in microseconds since the trace's start.
  void AddCompleteMicros(const std::string& name, const std::string& category,
                         int pid, int tid, double start_us, double duration_us,
                         const NumberFields& args = {},
                         const StringFields& string_args = {});

  // Microseconds from the trace's start to `t` (negative before it).
  double ToMicros(Clock::time_point t) const;

  int64_t num_events() const;    // complete events kept
  int64_t num_dropped() const;   // complete events over max_events

  // The whole trace as a JSON object: metadata events first.
  std::string ToJson() const;
  // Writes ToJson() to `path` (through a temporary file renamed into place,
  // so a reader never sees half a trace). Throws tandem::Error naming the
  // path and `flag` on failure.
  void Write(const std::string& path, const std::string& flag = "--trace") const;

 private:
  Clock::time_point start_;
  int64_t max_events_;
  mutable std::mutex mutex_;
  std::vector<std::string> metadata_;  // rendered "ph":"M" events
  std::vector<std::string> events_;    // rendered "ph":"X" events
  int64_t dropped_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_REPORT_CHROME_TRACE_H_
