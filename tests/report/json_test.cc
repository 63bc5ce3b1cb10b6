#include "report/json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "tests/report/json_checker.h"

namespace tandem {
namespace {

std::string Number(double v) { return JsonText(JsonNumber(v)); }

std::string Quoted(const std::string& s) { return JsonText(Json(s)); }

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
    Json parsed;
    std::string error;
    ASSERT_TRUE(testing::ParseJson(Number(v), &parsed, &error)) << Number(v) << ": " << error;
    EXPECT_EQ(parsed.get<double>(), v);
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
  // A byte that is not UTF-8 becomes U+FFFD: the text stays valid JSON.
  EXPECT_EQ(Quoted("a\xff"), "\"a\xef\xbf\xbd\"");
}

TEST(JsonTest, ObjectPutsNumbersThenStrings) {
  EXPECT_EQ(JsonText(JsonObject({{"step", 100}, {"loss", 0.5}}, {{"split", "train"}})),
            R"({"step":100,"loss":0.5,"split":"train"})");
  EXPECT_EQ(JsonText(JsonObject({}, {})), "{}");
  // A repeated key keeps its first place and its last value.
  EXPECT_EQ(JsonText(JsonObject({{"a", 1}, {"b", 2}, {"a", 3}}, {})), R"({"a":3,"b":2})");
}

TEST(JsonTest, ParseReadsBackWhatJsonObjectWrites) {
  const NumberFields numbers = {{"step", 100}, {"loss", 0.1 + 0.2}, {"tiny", 1e-300},
                                {"big", -6.02e23}, {"k\"ey\n", 7}};
  const StringFields strings = {{"split", "train"},
                                {"note", std::string("a\"b\\c\n\t\x01 caf\xc3\xa9", 14)}};
  const std::string text = JsonText(JsonObject(numbers, strings));
  NumberFields read_numbers;
  StringFields read_strings;
  ASSERT_TRUE(ParseJsonObject(text, &read_numbers, &read_strings)) << text;
  EXPECT_EQ(read_numbers, numbers);  // bit for bit
  EXPECT_EQ(read_strings, strings);
}

TEST(JsonTest, ParseTakesNullSpacesAndEscapes) {
  NumberFields numbers;
  StringFields strings;
  ASSERT_TRUE(ParseJsonObject(R"( { "a" : null , "b":-0.5e2, "s":"\u00e9\ud83d\ude00\/" } )",
                              &numbers, &strings));
  ASSERT_EQ(numbers.size(), 2u);
  EXPECT_TRUE(std::isnan(numbers[0].second));
  EXPECT_EQ(numbers[1].second, -50);
  ASSERT_EQ(strings.size(), 1u);
  EXPECT_EQ(strings[0].second, "\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_TRUE(ParseJsonObject("{}", &numbers, &strings));
  EXPECT_TRUE(numbers.empty() && strings.empty());
}

TEST(JsonTest, ParseRejectsWhatIsNotAFlatObject) {
  NumberFields numbers;
  StringFields strings;
  for (const char* bad : {"", "[]", "{", R"({"a":1)", R"({"a":1,})", R"({"a":{}})",
                          R"({"a":[1]})", R"({"a":true})", R"({"a":01})", R"({"a":.5})",
                          R"({"a":1.})", R"({"a":inf})", R"({"a":nan})", R"({"a":"x)",
                          R"({"a":"\q"})", "{\"a\":\"\x01\"}", R"({"a":1} x)",
                          R"({"a":"\udc00"})", R"({a:1})", R"({"a":1e999})",
                          "{\"a\":\"\xff\"}"}) {
    EXPECT_FALSE(ParseJsonObject(bad, &numbers, &strings)) << bad;
  }
}

}  // namespace
}  // namespace tandem
