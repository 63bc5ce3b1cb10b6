// One writer per directory: an advisory lock that a run holds on its
// checkpoint directory from start to end, so that a second run pointed at
// the same directory stops at once, naming the first, instead of the two
// overwriting each other's checkpoints.
//
//   DirectoryLock lock("/ckpt/run1");  // throws tandem::Error if another
//                                      // process holds it; released on
//                                      // destruction (or when the process dies)
//
// The lock is flock(2) on `dir`/.tandem.lock, which holds "pid P on host H"
// for the error message. The kernel drops it when the holder exits, however
// it exits, so a killed run never leaves the directory locked. On a network
// file system flock works where the server supports locks (NFSv4 does).
#ifndef TANDEM_IO_DIRECTORY_LOCK_H_
#define TANDEM_IO_DIRECTORY_LOCK_H_

#include <string>

namespace tandem {

inline constexpr char kDirectoryLockFileName[] = ".tandem.lock";

class DirectoryLock {
 public:
  // `dir` must exist. Throws tandem::Error (no source location: a user's
  // setup, not a bug) when another holder has it: "/ckpt/run1 is in use by
  // another run (pid 4242 on host node7): ...".
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// "pid P on host H": how a holder names itself.
std::string ThisProcessName();

}  // namespace tandem

#endif  // TANDEM_IO_DIRECTORY_LOCK_H_
