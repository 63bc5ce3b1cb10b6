#include "report/write_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/check.h"

namespace tandem {

void WriteFileAtomically(const std::string& path, const std::string& contents,
                         const std::string& flag) {
  TANDEM_CHECK(!path.empty()) << flag << " needs a file name";
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  TANDEM_CHECK(file != nullptr)
      << "cannot write " << flag << "=" << path << ": " << std::strerror(errno)
      << "; check that the directory exists and is writable";
  const bool written =
      std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  int error = errno;
  const bool closed = std::fclose(file) == 0;  // flushes: may fail on a full disk
  if (written && !closed) error = errno;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    TANDEM_CHECK(false) << "writing " << flag << "=" << path
                        << " failed: " << std::strerror(error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    std::remove(temporary.c_str());
    TANDEM_CHECK(false) << "cannot write " << flag << "=" << path << ": "
                        << std::strerror(error);
  }
}

}  // namespace tandem
