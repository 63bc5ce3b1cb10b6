// The JSON and XML checkers reject what they must: a checker that accepted
// everything would make every report test pass.
#include <gtest/gtest.h>

#include "tests/report/json_checker.h"
#include "tests/report/xml_checker.h"

namespace tandem {
namespace testing {
namespace {

TEST(JsonCheckerTest, AcceptsValidDocuments) {
  nlohmann::ordered_json v;
  std::string error;
  ASSERT_TRUE(ParseJson(R"( {"a":[1,-2.5e3,true,null,"x\"\u00e9\ud83d\ude00"],"b":{}} )",
                        &v, &error))
      << error;
  ASSERT_TRUE(v.is_object());
  ASSERT_TRUE(v.contains("a"));
  const nlohmann::ordered_json& a = v.at("a");
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[1].get<double>(), -2500.0);
  EXPECT_EQ(a[4].get<std::string>(), "x\"\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonCheckerTest, RejectsInvalidDocuments) {
  for (const char* bad :
       {"", "{", "{\"a\":1,}", "[1,]", "{'a':1}", "{\"a\":NaN}", "{\"a\":Infinity}",
        "{\"a\":01}", "{\"a\":.5}", "{\"a\":1.}", "{\"a\":+1}", "\"tab\there\"",
        "\"\\x\"", "{\"a\":1}{", "{\"a\":1,\"a\":2}", "[{\"o\":{\"b\":1,\"b\":2}}]",
        "\"\\ud800\"", "nul", "\"\xff\"", "// c\n1"}) {
    nlohmann::ordered_json v;
    std::string error;
    EXPECT_FALSE(ParseJson(bad, &v, &error)) << "accepted: " << bad;
  }
  nlohmann::ordered_json nul;
  std::string nul_error;
  EXPECT_FALSE(ParseJson(std::string_view("{}\0}", 4), &nul, &nul_error)) << "accepted a NUL";
  // The same key in two objects is no repeat.
  nlohmann::ordered_json v;
  std::string error;
  EXPECT_TRUE(ParseJson(R"([{"a":1},{"a":{"a":2}}])", &v, &error)) << error;
}

TEST(XmlCheckerTest, AcceptsAndDecodes) {
  XmlElement root;
  std::string error;
  ASSERT_TRUE(ParseXml("<?xml version=\"1.0\"?>\n<!-- c --><svg a=\"1 &amp; 2\" b='x'>"
                       "<text>&lt;tag&gt; &#65;&#x42;</text><g/></svg>\n",
                       &root, &error))
      << error;
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(*root.Attribute("a"), "1 & 2");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(root.children[0].text, "<tag> AB");
  EXPECT_EQ(root.FindAll("g").size(), 1u);
}

TEST(XmlCheckerTest, RejectsMalformedDocuments) {
  for (const char* bad :
       {"", "<a>", "<a></b>", "<a><b></a></b>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>",
        "<a>&nbsp;</a>", "<a>AT&T</a>", "<a>1 < 2</a>", "<a x=\"<\"/>", "<a/><b/>",
        "<a/>text", "<a x=\"1\"y=\"2\"/>", "<a>\x01</a>", "<a><!-- a -- b --></a>"}) {
    XmlElement root;
    std::string error;
    EXPECT_FALSE(ParseXml(bad, &root, &error)) << "accepted: " << bad;
  }
}

}  // namespace
}  // namespace testing
}  // namespace tandem
