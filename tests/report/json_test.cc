#include "report/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/report/json_checker.h"

namespace tandem {
namespace {

std::string Number(double v) {
  std::string out;
  AppendJsonNumber(v, &out);
  return out;
}

std::string Quoted(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

TEST(JsonTest, NumbersAreShortestRoundTrip) {
  EXPECT_EQ(Number(100), "100");  // integers print without ".0"
  EXPECT_EQ(Number(0.53), "0.53");
  EXPECT_EQ(Number(0.1 + 0.2), "0.30000000000000004");  // exact, not rounded
  EXPECT_EQ(Number(-2.5), "-2.5");
  EXPECT_EQ(Number(-0.0), "0");
  EXPECT_EQ(Number(15000), "15000");
  // Exponent forms stay valid JSON.
  for (const double v : {1e21, 1e-7, 6.02e23, std::numeric_limits<double>::max(),
                         std::numeric_limits<double>::denorm_min()}) {
    testing::JsonValue parsed;
    std::string error;
    ASSERT_TRUE(testing::ParseJson(Number(v), &parsed, &error)) << Number(v) << ": " << error;
    EXPECT_EQ(parsed.number, v);
  }
}

TEST(JsonTest, NonFiniteNumbersAreNull) {
  EXPECT_EQ(Number(std::nan("")), "null");
  EXPECT_EQ(Number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(Number(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonTest, StringsAreEscaped) {
  EXPECT_EQ(Quoted("plain"), "\"plain\"");
  EXPECT_EQ(Quoted("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Quoted("line\nbreak\ttab\r\b\f"), R"("line\nbreak\ttab\r\b\f")");
  EXPECT_EQ(Quoted(std::string("nul\0x\x1f", 6)), R"("nul\u0000x\u001f")");
  EXPECT_EQ(Quoted("caf\xc3\xa9 /"), "\"caf\xc3\xa9 /\"");  // UTF-8 passes through
}

TEST(JsonTest, ObjectPutsNumbersThenStrings) {
  std::string out;
  AppendJsonObject({{"step", 100}, {"loss", 0.5}}, {{"split", "train"}}, &out);
  EXPECT_EQ(out, R"({"step":100,"loss":0.5,"split":"train"})");
  out.clear();
  AppendJsonObject({}, {}, &out);
  EXPECT_EQ(out, "{}");
}

}  // namespace
}  // namespace tandem
