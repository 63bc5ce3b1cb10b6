#include "report/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/check.h"
#include "report/write_file.h"

namespace tandem {

namespace {

// Metadata event: {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{...}}.
std::string Metadata(const char* kind, int pid, int tid, const NumberFields& numbers,
                     const StringFields& strings) {
  return JsonText(Json{{"name", kind},
                       {"ph", "M"},
                       {"pid", pid},
                       {"tid", tid},
                       {"args", JsonObject(numbers, strings)}});
}

// Rounded to nanoseconds: "1500", "12.346"; no exponent for a viewer to
// trip on (nlohmann writes fractions down to 0.001, and times below 10^15
// us, 31 years, without one).
Json Micros(double us) { return JsonNumber(std::round(us * 1000) / 1000); }

}  // namespace

ChromeTrace::ChromeTrace(Clock::time_point start, int64_t max_events)
    : start_(start), max_events_(max_events) {
  TANDEM_CHECK(max_events_ >= 0) << "ChromeTrace: max_events must be >= 0, got "
                                 << max_events_;
}

void ChromeTrace::SetProcessName(int pid, const std::string& name) {
  // The sort index keeps "worker 0" above "worker 1" whatever the names.
  std::string named = Metadata("process_name", pid, 0, {}, {{"name", name}});
  std::string sorted = Metadata("process_sort_index", pid, 0, {{"sort_index", pid}}, {});
  std::lock_guard<std::mutex> lock(mutex_);
  metadata_.push_back(std::move(named));
  metadata_.push_back(std::move(sorted));
}

void ChromeTrace::SetThreadName(int pid, int tid, const std::string& name) {
  std::string named = Metadata("thread_name", pid, tid, {}, {{"name", name}});
  std::string sorted = Metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}, {});
  std::lock_guard<std::mutex> lock(mutex_);
  metadata_.push_back(std::move(named));
  metadata_.push_back(std::move(sorted));
}

double ChromeTrace::ToMicros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - start_).count();
}

void ChromeTrace::AddComplete(const std::string& name, const std::string& category,
                              int pid, int tid, Clock::time_point begin,
                              Clock::time_point end, const NumberFields& args,
                              const StringFields& string_args) {
  AddCompleteMicros(name, category, pid, tid, ToMicros(begin),
                    std::chrono::duration<double, std::micro>(end - begin).count(), args,
                    string_args);
}

void ChromeTrace::AddCompleteMicros(const std::string& name, const std::string& category,
                                    int pid, int tid, double start_us, double duration_us,
                                    const NumberFields& args,
                                    const StringFields& string_args) {
  TANDEM_CHECK(std::isfinite(start_us) && std::isfinite(duration_us) && duration_us >= 0)
      << "trace event '" << name << "' (pid " << pid << ", tid " << tid
      << ") has start " << start_us << " us and duration " << duration_us
      << " us: it must end no earlier than it starts";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<int64_t>(events_.size()) >= max_events_) {
      ++dropped_;
      return;
    }
  }
  // Rendered outside the lock: worker threads only contend for the push.
  Json fields{{"name", name},
              {"cat", category},
              {"ph", "X"},
              {"pid", pid},
              {"tid", tid},
              {"ts", Micros(start_us)},
              {"dur", Micros(duration_us)}};
  if (!args.empty() || !string_args.empty()) fields["args"] = JsonObject(args, string_args);
  std::string event = JsonText(fields);
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<int64_t>(events_.size()) >= max_events_) {
    ++dropped_;  // another thread filled the last slot meanwhile
    return;
  }
  events_.push_back(std::move(event));
}

int64_t ChromeTrace::num_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(events_.size());
}

int64_t ChromeTrace::num_dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::string ChromeTrace::ToJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string json = "{\"traceEvents\":[\n";
  bool first = true;
  for (const std::vector<std::string>* group : {&metadata_, &events_}) {
    for (const std::string& event : *group) {
      if (!first) json += ",\n";
      first = false;
      json += event;
    }
  }
  json += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":";
  json += JsonText(JsonObject({{"dropped_events", static_cast<double>(dropped_)}},
                              {{"producer", "tandem"}}));
  json += "}\n";
  return json;
}

void ChromeTrace::Write(const std::string& path, const std::string& flag) const {
  WriteFileAtomically(path, ToJson(), flag);
}

}  // namespace tandem
