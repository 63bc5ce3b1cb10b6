// io/directory_lock.h: one holder at a time, named in the refusal; the lock
// goes with its holder, whether it lets go or is killed.
#include "io/directory_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "core/check.h"

namespace tandem {
namespace {

std::string MakeDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string LockError(const std::string& dir) {
  try {
    DirectoryLock lock(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(DirectoryLockTest, ASecondHolderIsRefusedNamingTheFirst) {
  const std::string dir = MakeDir("held");
  std::optional<DirectoryLock> first(std::in_place, dir);
  const std::string error = LockError(dir);
  EXPECT_EQ(error.rfind(dir + " is in use by another run (" + ThisProcessName() +
                            "): two runs on one checkpoint directory would overwrite each "
                            "other's checkpoints",
                        0),
            0u)
      << error;
  EXPECT_EQ(error.find(" at "), std::string::npos) << "a source location: " << error;
  first.reset();
  EXPECT_EQ(LockError(dir), "<no error>");
}

// A holder killed with SIGKILL runs no destructor; the kernel still drops
// its lock.
TEST(DirectoryLockTest, AKilledHolderLeavesTheDirectoryFree) {
  const std::string dir = MakeDir("killed");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    DirectoryLock lock(dir);
    const char c = 'x';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(LockError(dir).find("(pid " + std::to_string(child) + " on host "),
            std::string::npos);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_EQ(LockError(dir), "<no error>");
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(DirectoryLockTest, AMissingDirectoryIsNamed) {
  EXPECT_NE(LockError("/nonexistent/dir").find("cannot create the lock file "
                                               "/nonexistent/dir/.tandem.lock"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
