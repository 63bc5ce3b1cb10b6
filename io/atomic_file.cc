#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace tandem {
namespace {

void WriteAll(int fd, const char* data, size_t size, const std::string& context) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n > 0) << context << ": " << (n < 0 ? Errno() : "write returned 0")
                        << " (is the disk full?)";
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void SyncDirectoryOf(const std::string& path, const std::string& context) {
  const std::string dir = DirectoryOf(path);
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  TANDEM_CHECK(dir_fd.get() >= 0)
      << context << ": cannot open directory " << dir << " to fsync it: " << Errno();
  // EINVAL: the file system cannot sync directories (and needs no sync).
  TANDEM_CHECK(::fsync(dir_fd.get()) == 0 || errno == EINVAL)
      << context << ": fsync of directory " << dir << " failed: " << Errno();
}

}  // namespace

std::string Errno() { return std::strerror(errno); }

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::Close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

std::string TemporaryPrefixFor(const std::string& path) { return path + ".tmp."; }

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "unknown";
  return host;
}

std::string TemporaryPathFor(const std::string& path, int pid) {
  return TemporaryPrefixFor(path) + HostName() + "." + std::to_string(pid);
}

std::string TemporaryPathFor(const std::string& path) {
  return TemporaryPathFor(path, static_cast<int>(::getpid()));
}

// Note [Atomic replace]
// A save must never leave `path` half-written: a job killed while saving
// (pre-emption, OOM, Ctrl-C) would otherwise lose the previous file as well
// as the new one. So the new bytes go to a temporary file (TemporaryPathFor:
// one per writer, so that two writers never truncate each other's); fsync makes them
// durable; rename() then swaps the name over in one step (POSIX guarantees
// a reader sees the old file or the new one, nothing between); and fsync of
// the directory makes the rename itself durable across a power loss. A kill
// at any moment leaves `path` intact; at worst a stale temporary is left
// behind (parallel/checkpointer.cc reports a complete one it finds).
void WriteFileAtomically(const std::string& path, const std::string& context,
                         const std::function<void(const ByteSink&)>& produce) {
  const std::string tmp = TemporaryPathFor(path);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    TANDEM_CHECK(fd.get() >= 0) << context << ": cannot create " << tmp << ": " << Errno();
    try {
      produce([&](const char* data, size_t size) { WriteAll(fd.get(), data, size, context); });
      TANDEM_CHECK(::fsync(fd.get()) == 0)
          << context << ": fsync of " << tmp << " failed: " << Errno();
      TANDEM_CHECK(fd.Close() == 0) << context << ": closing " << tmp << " failed: " << Errno();
    } catch (...) {
      ::unlink(tmp.c_str());  // best effort; the old file is intact
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = Errno();
    ::unlink(tmp.c_str());
    TANDEM_CHECK(false) << context << ": cannot rename " << tmp << " over it: " << why;
  }
  SyncDirectoryOf(path, context);
}

}  // namespace tandem
