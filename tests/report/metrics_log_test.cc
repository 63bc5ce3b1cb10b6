#include "report/metrics_log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

#include "core/check.h"
#include "tests/report/json_checker.h"

namespace tandem {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Json Parse(const std::string& line) {
  Json v;
  std::string error;
  EXPECT_TRUE(testing::ParseJson(line, &v, &error)) << error << "\nline: " << line;
  EXPECT_TRUE(v.is_object()) << line;
  return v;
}

TEST(MetricsLogTest, EachWriteIsOneJsonObjectLine) {
  const std::string path = TempPath("metrics_basic.jsonl");
  MetricsLog log(path);
  log.Write({{"step", 100}, {"epoch", 1}, {"loss", 0.53}, {"accuracy", 0.81},
             {"samples_per_second", 15000}, {"comm_wait_seconds", 0.01}},
            {{"split", "train"}});
  log.Write({{"epoch", 1}, {"accuracy", 0.8}}, {{"split", "test"}});
  EXPECT_EQ(log.lines_written(), 2);
  // Read while the log is still open: every line is already on disk.
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            R"({"step":100,"epoch":1,"loss":0.53,"accuracy":0.81,)"
            R"("samples_per_second":15000,"comm_wait_seconds":0.01,"split":"train"})");
  const Json second = Parse(lines[1]);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second.at("accuracy").get<double>(), 0.8);
  EXPECT_EQ(second.at("split").get<std::string>(), "test");
}

TEST(MetricsLogTest, NonFiniteNumbersAreNull) {
  const std::string path = TempPath("metrics_nan.jsonl");
  MetricsLog log(path);
  log.Write({{"loss", std::nan("")},
             {"grad_norm", std::numeric_limits<double>::infinity()},
             {"lr", -std::numeric_limits<double>::infinity()},
             {"step", 7}});
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], R"({"loss":null,"grad_norm":null,"lr":null,"step":7})");
  const Json v = Parse(lines[0]);
  EXPECT_TRUE(v.at("loss").is_null());
  EXPECT_EQ(v.at("step").get<double>(), 7);
}

TEST(MetricsLogTest, KeysAndStringsAreEscaped) {
  const std::string path = TempPath("metrics_escape.jsonl");
  const std::string nasty = "a \"quoted\" back\\slash\nnew line\ttab \x01 caf\xc3\xa9";
  {
    MetricsLog log(path);
    log.Write({{nasty, 1.5}}, {{"note", nasty}, {"", ""}});
  }
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);  // the newline inside the value stayed escaped
  const Json v = Parse(lines[0]);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.begin().key(), nasty);
  EXPECT_EQ(v.begin().value().get<double>(), 1.5);
  EXPECT_EQ(v.at("note").get<std::string>(), nasty);
  EXPECT_EQ(v.at("").get<std::string>(), "");
}

TEST(MetricsLogTest, NumbersRoundTripExactly) {
  const std::string path = TempPath("metrics_numbers.jsonl");
  const std::vector<double> values = {0.1, 1.0 / 3, 1e-12, 123456789012345.0, -2.5e300,
                                      6.02214076e23};
  {
    MetricsLog log(path);
    NumberFields fields;
    for (size_t i = 0; i < values.size(); ++i) fields.push_back({"v" + std::to_string(i), values[i]});
    log.Write(fields);
  }
  const Json v = Parse(Lines(path).at(0));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(v.at("v" + std::to_string(i)).get<double>(), values[i]) << i;
  }
}

TEST(MetricsLogTest, ConcurrentWritersNeverInterleave) {
  const std::string path = TempPath("metrics_threads.jsonl");
  MetricsLog log(path);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&log, rank] {
      for (int step = 0; step < 200; ++step) {
        log.Write({{"rank", rank}, {"step", step}, {"loss", 1.0 / (step + 1)}},
                  {{"split", "train"}});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 800u);
  std::vector<int> per_rank(4, 0);
  for (const std::string& line : lines) {
    const Json v = Parse(line);
    ++per_rank.at(v.at("rank").get<int>());
  }
  EXPECT_EQ(per_rank, std::vector<int>(4, 200));
}

TEST(MetricsLogTest, OpenFailureNamesThePathAndTheFlag) {
  const std::string path = TempPath("no_such_dir/metrics.jsonl");
  try {
    MetricsLog log(path);
    FAIL() << "opened " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--metrics=" + path), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
  EXPECT_THROW(MetricsLog(""), Error);
}

TEST(MetricsLogTest, OpeningTruncatesAnOldLog) {
  const std::string path = TempPath("metrics_truncate.jsonl");
  { MetricsLog(path).Write({{"old", 1}}); }
  { MetricsLog(path).Write({{"new", 2}}); }
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], R"({"new":2})");
}

// A resumed run continues its log (--resume with --metrics).
TEST(MetricsLogTest, AppendModeKeepsTheOldLines) {
  const std::string path = TempPath("metrics_append.jsonl");
  { MetricsLog(path).Write({{"epoch", 1}}); }
  { MetricsLog(path, "--metrics", MetricsLog::OpenMode::kAppend).Write({{"epoch", 2}}); }
  EXPECT_EQ(Lines(path), (std::vector<std::string>{R"({"epoch":1})", R"({"epoch":2})"}));
  // Appending creates a log that is not there.
  const std::string fresh = TempPath("metrics_append_fresh.jsonl");
  std::remove(fresh.c_str());
  { MetricsLog(fresh, "--metrics", MetricsLog::OpenMode::kAppend).Write({{"epoch", 1}}); }
  EXPECT_EQ(Lines(fresh), std::vector<std::string>{R"({"epoch":1})"});
}

TEST(MetricsLogTest, AppendAfterATornLineStartsANewLine) {
  const std::string path = TempPath("metrics_torn.jsonl");
  { std::ofstream(path) << "{\"epoch\":1}\n{\"epo"; }  // killed mid-line
  { MetricsLog(path, "--metrics", MetricsLog::OpenMode::kAppend).Write({{"epoch", 2}}); }
  EXPECT_EQ(Lines(path),
            (std::vector<std::string>{R"({"epoch":1})", R"({"epo)", R"({"epoch":2})"}));
  // Reading back skips the torn line.
  const std::vector<MetricsRow> rows = ReadMetricsLog(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Number("epoch"), 1);
  EXPECT_EQ(rows[1].Number("epoch"), 2);
}

TEST(MetricsLogTest, ReadBackGivesWhatWasWritten) {
  const std::string path = TempPath("metrics_read.jsonl");
  {
    MetricsLog log(path);
    log.Write({{"epoch", 1}, {"loss", 0.53}, {"accuracy", 1.0 / 3}}, {{"split", "train"}});
    log.Write({{"epoch", 1}, {"loss", std::nan("")}}, {{"split", "te\"st\n"}});
  }
  const std::vector<MetricsRow> rows = ReadMetricsLog(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].Number("loss"), 0.53);
  EXPECT_EQ(rows[0].Number("accuracy"), 1.0 / 3);  // exactly
  EXPECT_EQ(rows[0].String("split"), "train");
  EXPECT_TRUE(std::isnan(rows[1].Number("loss")));   // null
  EXPECT_TRUE(std::isnan(rows[1].Number("absent")));
  EXPECT_EQ(rows[1].String("split"), "te\"st\n");
  EXPECT_EQ(rows[1].String("absent"), "");
  EXPECT_TRUE(ReadMetricsLog(TempPath("no_such_metrics.jsonl")).empty());
}

}  // namespace
}  // namespace tandem
