#include "core/check.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

std::string MessageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CheckTest, PassingCheckDoesNothing) {
  int evaluations = 0;
  TANDEM_CHECK(++evaluations == 1) << "never shown";
  EXPECT_EQ(evaluations, 1);  // the condition is evaluated exactly once
}

TEST(CheckTest, StreamedMessageCarriesExpressionAndLocation) {
  const std::string msg = MessageOf([] {
    int workers = 0;
    TANDEM_CHECK(workers >= 1) << "--workers must be at least 1, got " << workers;
  });
  EXPECT_NE(msg.find("--workers must be at least 1, got 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("workers >= 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tests/core/check_test.cc:"), std::string::npos) << msg;
}

TEST(CheckTest, MessageArgumentForm) {
  const std::string msg = MessageOf([] { TANDEM_CHECK(1 + 1 == 3, "arithmetic"); });
  EXPECT_EQ(msg.rfind("arithmetic [1 + 1 == 3 at tests/core/check_test.cc:", 0), 0u)
      << msg;
}

const char* FakeErrorString(int code) { return code == 7 ? "seven went wrong" : "?"; }
bool FakeOk(int code) { return code == 0; }
#define FAKE_CHECK(call) TANDEM_CHECK_GEN(int, (call), FakeOk, FakeErrorString, #call)

TEST(CheckTest, LibraryCheckIncludesLibraryErrorString) {
  const std::string msg = MessageOf([] { FAKE_CHECK(7) << "allocating"; });
  EXPECT_NE(msg.find("allocating: seven went wrong"), std::string::npos) << msg;
  EXPECT_NO_THROW(FAKE_CHECK(0));
}

TEST(CheckTest, DoesNotCaptureCallersElse) {
  bool else_taken = false;
  if (false)
    TANDEM_CHECK(true);
  else
    else_taken = true;
  EXPECT_TRUE(else_taken);
}

}  // namespace
}  // namespace tandem
