// Files that are replaced whole or not at all, and the descriptor guard the
// readers of io/ share.
//
//   WriteFileAtomically(path, "writing checkpoint " + path,
//                       [&](const ByteSink& write) { write(bytes, n); ... });
//
// See Note [Atomic replace] in atomic_file.cc.
#ifndef TANDEM_IO_ATOMIC_FILE_H_
#define TANDEM_IO_ATOMIC_FILE_H_

#include <cstddef>
#include <functional>
#include <string>

namespace tandem {

// Receives the file's bytes, in order, in pieces of any size.
using ByteSink = std::function<void(const char* data, size_t size)>;

// The temporary file a writer (process `pid` on this host) fills before it
// renames it over `path`: path + ".tmp.<host>.<pid>", so that two writers
// never share one. A save killed before its rename leaves it behind.
std::string TemporaryPathFor(const std::string& path, int pid);
std::string TemporaryPathFor(const std::string& path);  // this process's
// The prefix every writer's temporary file of `path` starts with.
std::string TemporaryPrefixFor(const std::string& path);

// Writes what `produce` hands its sink to TemporaryPathFor(path), fsyncs it, renames
// it over `path` and fsyncs the directory. Throws tandem::Error starting
// with `context` ("writing checkpoint /x/y.tnd") on any failure, leaving
// `path` as it was.
void WriteFileAtomically(const std::string& path, const std::string& context,
                         const std::function<void(const ByteSink&)>& produce);

// strerror(errno), for messages.
std::string Errno();

// This machine's host name ("unknown" if it has none), for names that must
// differ between writers on several hosts and for messages.
std::string HostName();

// Closes a descriptor on scope exit without throwing (destructors never
// throw); Close() reports the error where one matters.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Returns close()'s result; the descriptor is released either way.
  int Close();

 private:
  int fd_;
};

}  // namespace tandem

#endif  // TANDEM_IO_ATOMIC_FILE_H_
