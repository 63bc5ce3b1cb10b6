#include "report/chrome_trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

using std::chrono::microseconds;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

Json ParseTrace(const std::string& json) {
  Json v;
  std::string error;
  EXPECT_TRUE(testing::ParseJson(json, &v, &error)) << error;
  return v;
}

// The events of a parsed trace with phase `ph`.
std::vector<const Json*> EventsOf(const Json& trace, const std::string& ph) {
  std::vector<const Json*> out;
  if (!trace.contains("traceEvents")) return out;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") == ph) out.push_back(&e);
  }
  return out;
}

// The number or string at `key` of `event`; throws if it has none.
double Number(const Json& event, const char* key) { return event.at(key).get<double>(); }
std::string String(const Json& event, const char* key) {
  return event.at(key).get<std::string>();
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

  const Json v = ParseTrace(trace.ToJson());
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(String(v, "displayTimeUnit"), "ms");
  ASSERT_TRUE(v.at("traceEvents").is_array());

  const std::vector<const Json*> complete = EventsOf(v, "X");
  ASSERT_EQ(complete.size(), 2u);
  const Json& backward = *complete[0];
  EXPECT_EQ(String(backward, "name"), "backward fc2");
  EXPECT_EQ(String(backward, "cat"), "compute");
  EXPECT_EQ(Number(backward, "pid"), 0);
  EXPECT_EQ(Number(backward, "tid"), 0);
  EXPECT_EQ(Number(backward, "ts"), 1500.0);
  EXPECT_EQ(Number(backward, "dur"), 750.0);
  EXPECT_EQ(Number(backward.at("args"), "layer"), 2);
  const Json& reduce = *complete[1];
  EXPECT_EQ(Number(reduce, "tid"), 1);
  EXPECT_EQ(Number(reduce, "ts"), 2000.0);
  EXPECT_EQ(Number(reduce, "dur"), 3000.0);
  EXPECT_EQ(Number(reduce.at("args"), "bytes"), 4194304);
  EXPECT_EQ(String(reduce.at("args"), "params"), "fc2.weight,fc2.bias");

  // Row names and sort order, as metadata events.
  std::vector<std::string> names;
  for (const Json* m : EventsOf(v, "M")) {
    const std::string kind = String(*m, "name");
    if (kind == "process_name" || kind == "thread_name") {
      names.push_back(kind + ":" + std::to_string(static_cast<int>(Number(*m, "tid"))) +
                      ":" + String(m->at("args"), "name"));
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"process_name:0:worker 0",
                                             "thread_name:0:compute",
                                             "thread_name:1:communication"}));
}

TEST(ChromeTraceTest, TimestampsKeepSubMicrosecondResolution) {
  ChromeTrace trace;
  trace.AddCompleteMicros("tiny", "compute", 0, 0, 12.3456, 0.25);
  const Json v = ParseTrace(trace.ToJson());
  const Json& e = *EventsOf(v, "X").at(0);
  EXPECT_DOUBLE_EQ(Number(e, "ts"), 12.346);  // nanoseconds kept
  EXPECT_DOUBLE_EQ(Number(e, "dur"), 0.25);
  EXPECT_FALSE(e.contains("args"));  // no args, no empty object
  // Compact, one event a line, fixed field order.
  EXPECT_NE(trace.ToJson().find(
                "\n{\"name\":\"tiny\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                "\"ts\":12.346,\"dur\":0.25}\n"),
            std::string::npos)
      << trace.ToJson();
}

TEST(ChromeTraceTest, NamesAreEscaped) {
  ChromeTrace trace;
  trace.SetProcessName(3, "worker \"3\"\n");
  trace.AddCompleteMicros("layer \\ fc<1>", "compute", 3, 0, 0, 1, {}, {{"note", "a\tb"}});
  const Json v = ParseTrace(trace.ToJson());
  EXPECT_EQ(String(*EventsOf(v, "X").at(0), "name"), "layer \\ fc<1>");
  EXPECT_EQ(String(EventsOf(v, "X").at(0)->at("args"), "note"), "a\tb");
  EXPECT_EQ(String(EventsOf(v, "M").at(0)->at("args"), "name"), "worker \"3\"\n");
}

TEST(ChromeTraceTest, EmptyTraceIsValid) {
  ChromeTrace trace;
  const Json v = ParseTrace(trace.ToJson());
  EXPECT_TRUE(v.at("traceEvents").empty());
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
  const Json v = ParseTrace(trace.ToJson());
  EXPECT_EQ(EventsOf(v, "X").size(), 3u);
  EXPECT_EQ(Number(v.at("otherData"), "dropped_events"), 2);
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
  const Json v = ParseTrace(trace.ToJson());
  std::vector<int> per_rank(4, 0);
  for (const Json* e : EventsOf(v, "X")) {
    ++per_rank.at(static_cast<int>(Number(*e, "pid")));
    EXPECT_GE(Number(*e, "ts"), 0);
    EXPECT_GE(Number(*e, "dur"), 0);
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
