#include "report/write_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

TEST(WriteFileTest, WritesAndReplacesWithoutLeavingTemporaries) {
  const std::string path = TempPath("write_file_test.txt");
  WriteFileAtomically(path, "first", "--plot");
  EXPECT_EQ(Read(path), "first");
  WriteFileAtomically(path, "second, longer", "--plot");
  EXPECT_EQ(Read(path), "second, longer");
  EXPECT_FALSE(Exists(path + ".tmp"));
}

TEST(WriteFileTest, ErrorNamesFlagPathAndReason) {
  const std::string path = TempPath("no_such_dir/plot.svg");
  try {
    WriteFileAtomically(path, "x", "--plot");
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--plot=" + path), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tandem
