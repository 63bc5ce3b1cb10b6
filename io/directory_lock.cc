#include "io/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "io/atomic_file.h"  // HostName

namespace tandem {

std::string ThisProcessName() {
  return "pid " + std::to_string(::getpid()) + " on host " + HostName();
}

namespace {

// What the holder wrote, for the message; "" if unreadable.
std::string HolderOf(int fd) {
  char text[512] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : "";
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir) {
  const std::string path = dir + "/" + kDirectoryLockFileName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw Error("cannot create the lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = HolderOf(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) {
      throw Error("cannot lock " + path + ": " + std::strerror(error));
    }
    throw Error(dir + " is in use by another run (" +
                (holder.empty() ? std::string("its holder did not say who it is") : holder) +
                "): two runs on one checkpoint directory would overwrite each other's "
                "checkpoints; wait for it to end, or give this run another --checkpoint_dir");
  }
  const std::string me = ThisProcessName() + "\n";
  // Best effort: the name only improves another run's message.
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t ignored = ::pwrite(fd_, me.data(), me.size(), 0);
    (void)ignored;
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace tandem
