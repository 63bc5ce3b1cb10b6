#include "report/chrome_trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/check.h"
#include "tests/report/json_checker.h"

namespace tandem {
namespace {

using testing::JsonValue;
using std::chrono::microseconds;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

JsonValue ParseTrace(const std::string& json) {
  JsonValue v;
  std::string error;
  EXPECT_TRUE(testing::ParseJson(json, &v, &error)) << error;
  return v;
}

// The events of a parsed trace with phase `ph`.
std::vector<const JsonValue*> EventsOf(const JsonValue& trace, const std::string& ph) {
  std::vector<const JsonValue*> out;
  const JsonValue* events = trace.Find("traceEvents");
  if (events == nullptr) return out;
  for (const JsonValue& e : events->array) {
    const JsonValue* phase = e.Find("ph");
    if (phase != nullptr && phase->string == ph) out.push_back(&e);
  }
  return out;
}

TEST(ChromeTraceTest, WritesCompleteEventsAndRowNames) {
  const ChromeTrace::Clock::time_point t0 = ChromeTrace::Clock::now();
  ChromeTrace trace(t0);
  trace.SetProcessName(0, "worker 0");
  trace.SetThreadName(0, 0, "compute");
  trace.SetThreadName(0, 1, "communication");
  trace.AddComplete("backward fc2", "compute", 0, 0, t0 + microseconds(1500),
                    t0 + microseconds(2250), {{"layer", 2}});
  trace.AddComplete("all-reduce bucket 0", "comm", 0, 1, t0 + microseconds(2000),
                    t0 + microseconds(5000), {{"bucket", 0}, {"bytes", 4194304}},
                    {{"params", "fc2.weight,fc2.bias"}});
  EXPECT_EQ(trace.num_events(), 2);

  const JsonValue v = ParseTrace(trace.ToJson());
  ASSERT_EQ(v.kind, JsonValue::Kind::kObject);
  EXPECT_EQ(v.Find("displayTimeUnit")->string, "ms");
  ASSERT_EQ(v.Find("traceEvents")->kind, JsonValue::Kind::kArray);

  const std::vector<const JsonValue*> complete = EventsOf(v, "X");
  ASSERT_EQ(complete.size(), 2u);
  const JsonValue& backward = *complete[0];
  EXPECT_EQ(backward.Find("name")->string, "backward fc2");
  EXPECT_EQ(backward.Find("cat")->string, "compute");
  EXPECT_EQ(backward.Find("pid")->number, 0);
  EXPECT_EQ(backward.Find("tid")->number, 0);
  EXPECT_EQ(backward.Find("ts")->number, 1500.0);
  EXPECT_EQ(backward.Find("dur")->number, 750.0);
  EXPECT_EQ(backward.Find("args")->Find("layer")->number, 2);
  const JsonValue& reduce = *complete[1];
  EXPECT_EQ(reduce.Find("tid")->number, 1);
  EXPECT_EQ(reduce.Find("ts")->number, 2000.0);
  EXPECT_EQ(reduce.Find("dur")->number, 3000.0);
  EXPECT_EQ(reduce.Find("args")->Find("bytes")->number, 4194304);
  EXPECT_EQ(reduce.Find("args")->Find("params")->string, "fc2.weight,fc2.bias");

  // Row names and sort order, as metadata events.
  std::vector<std::string> names;
  for (const JsonValue* m : EventsOf(v, "M")) {
    const std::string kind = m->Find("name")->string;
    if (kind == "process_name" || kind == "thread_name") {
      names.push_back(kind + ":" + std::to_string(static_cast<int>(m->Find("tid")->number)) +
                      ":" + m->Find("args")->Find("name")->string);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"process_name:0:worker 0",
                                             "thread_name:0:compute",
                                             "thread_name:1:communication"}));
}

TEST(ChromeTraceTest, TimestampsKeepSubMicrosecondResolution) {
  ChromeTrace trace;
  trace.AddCompleteMicros("tiny", "compute", 0, 0, 12.3456, 0.25);
  const JsonValue v = ParseTrace(trace.ToJson());
  const JsonValue& e = *EventsOf(v, "X").at(0);
  EXPECT_DOUBLE_EQ(e.Find("ts")->number, 12.346);  // nanoseconds kept
  EXPECT_DOUBLE_EQ(e.Find("dur")->number, 0.25);
  EXPECT_EQ(e.Find("args"), nullptr);  // no args, no empty object
}

TEST(ChromeTraceTest, NamesAreEscaped) {
  ChromeTrace trace;
  trace.SetProcessName(3, "worker \"3\"\n");
  trace.AddCompleteMicros("layer \\ fc<1>", "compute", 3, 0, 0, 1, {}, {{"note", "a\tb"}});
  const JsonValue v = ParseTrace(trace.ToJson());
  EXPECT_EQ(EventsOf(v, "X").at(0)->Find("name")->string, "layer \\ fc<1>");
  EXPECT_EQ(EventsOf(v, "X").at(0)->Find("args")->Find("note")->string, "a\tb");
  EXPECT_EQ(EventsOf(v, "M").at(0)->Find("args")->Find("name")->string, "worker \"3\"\n");
}

TEST(ChromeTraceTest, EmptyTraceIsValid) {
  ChromeTrace trace;
  const JsonValue v = ParseTrace(trace.ToJson());
  EXPECT_TRUE(v.Find("traceEvents")->array.empty());
}

TEST(ChromeTraceTest, EventsEndingBeforeTheyStartAreRejected) {
  ChromeTrace trace;
  const auto t = ChromeTrace::Clock::now();
  EXPECT_THROW(trace.AddComplete("backwards", "compute", 0, 0, t, t - microseconds(1)),
               Error);
  EXPECT_THROW(trace.AddCompleteMicros("nan", "compute", 0, 0, std::nan(""), 1), Error);
  EXPECT_EQ(trace.num_events(), 0);
}

TEST(ChromeTraceTest, EventsBeyondTheCapAreCountedNotKept) {
  ChromeTrace trace(ChromeTrace::Clock::now(), /*max_events=*/3);
  for (int i = 0; i < 5; ++i) trace.AddCompleteMicros("step", "compute", 0, 0, i * 10.0, 5);
  EXPECT_EQ(trace.num_events(), 3);
  EXPECT_EQ(trace.num_dropped(), 2);
  const JsonValue v = ParseTrace(trace.ToJson());
  EXPECT_EQ(EventsOf(v, "X").size(), 3u);
  EXPECT_EQ(v.Find("otherData")->Find("dropped_events")->number, 2);
}

TEST(ChromeTraceTest, WorkersRecordConcurrently) {
  ChromeTrace trace;
  std::vector<std::thread> workers;
  for (int rank = 0; rank < 4; ++rank) {
    workers.emplace_back([&trace, rank] {
      trace.SetProcessName(rank, "worker " + std::to_string(rank));
      for (int step = 0; step < 250; ++step) {
        const auto begin = ChromeTrace::Clock::now();
        trace.AddComplete("step " + std::to_string(step), "compute", rank, 0, begin,
                          ChromeTrace::Clock::now(), {{"step", step}});
      }
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(trace.num_events(), 1000);
  const JsonValue v = ParseTrace(trace.ToJson());
  std::vector<int> per_rank(4, 0);
  for (const JsonValue* e : EventsOf(v, "X")) {
    ++per_rank.at(static_cast<int>(e->Find("pid")->number));
    EXPECT_GE(e->Find("ts")->number, 0);
    EXPECT_GE(e->Find("dur")->number, 0);
  }
  EXPECT_EQ(per_rank, std::vector<int>(4, 250));
}

TEST(ChromeTraceTest, WriteProducesTheSameJsonOnDisk) {
  ChromeTrace trace;
  trace.SetProcessName(0, "worker 0");
  trace.AddCompleteMicros("forward", "compute", 0, 0, 0, 100);
  const std::string path = TempPath("trace.json");
  trace.Write(path);
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(contents.str(), trace.ToJson());
  EXPECT_EQ(EventsOf(ParseTrace(contents.str()), "X").size(), 1u);
}

TEST(ChromeTraceTest, WriteFailureNamesThePathAndTheFlag) {
  ChromeTrace trace;
  const std::string path = TempPath("no_such_dir/trace.json");
  try {
    trace.Write(path);
    FAIL() << "wrote " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--trace=" + path), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tandem
