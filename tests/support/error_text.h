// What a call throws, as text: "" when it returns. For tests that check an
// error's words.
//
//   EXPECT_NE(ErrorText([&] { comm.Barrier()->Wait(); }).find("aborted"),
//             std::string::npos);
#ifndef TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_
#define TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_

#include <exception>
#include <functional>
#include <string>

namespace tandem {
namespace testing {

inline std::string ErrorText(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_
