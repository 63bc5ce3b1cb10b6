// A strict XML 1.0 well-formedness parser for tests of the SVG writer:
// matched tags, one root, quoted and unique attributes, only the predefined
// and numeric entities, no stray '<' or '&'. No DTDs or namespaces
// processing (the SVG writer emits neither). Test-only.
//
//   XmlElement svg;
//   std::string error;
//   ASSERT_TRUE(ParseXml(text, &svg, &error)) << error;
//   EXPECT_EQ(*svg.Attribute("viewBox"), "0 0 960 420");
#ifndef TANDEM_TESTS_CORE_REPORT_XML_CHECKER_H_
#define TANDEM_TESTS_CORE_REPORT_XML_CHECKER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {
namespace testing {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // decoded values
  std::string text;  // character data directly inside, decoded, concatenated
  std::vector<XmlElement> children;

  // The attribute's decoded value, or nullptr.
  const std::string* Attribute(const std::string& name) const;
  // Every element named `name` in this subtree (this one included), in
  // document order.
  std::vector<const XmlElement*> FindAll(const std::string& name) const;
};

// Parses a document (optional <?xml ...?> declaration, comments, one root
// element). On failure returns false and says where and why in `error`.
bool ParseXml(std::string_view text, XmlElement* root, std::string* error);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_CORE_REPORT_XML_CHECKER_H_
