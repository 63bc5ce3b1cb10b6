// What a call throws, as text: "" when it returns. For tests that check an
// error's words.
//
//   EXPECT_NE(ErrorText([&] { comm.Barrier()->Wait(); }).find("aborted"),
//             std::string::npos);
//   ExpectErrorContains([&] { ops::Permute(x, {0, 0}, out); }, "not an order");
#ifndef TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_
#define TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_

#include <gtest/gtest.h>

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

// A test failure unless `fn` throws an error whose text contains `text`.
inline void ExpectErrorContains(const std::function<void()>& fn, const std::string& text) {
  const std::string error = ErrorText(fn);
  EXPECT_NE(error.find(text), std::string::npos)
      << "expected an error containing \"" << text << "\", got \"" << error << "\"";
}

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_ERROR_TEXT_H_
