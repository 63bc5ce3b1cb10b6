#include "core/check.h"

#include <cstring>
#include <exception>

namespace tandem {
namespace internal {

namespace {
// "/abs/path/execroot/tandem/core/x.cc" and "core/x.cc" both print as the
// workspace-relative path, which is what a reader can open.
const char* ShortPath(const char* file) {
  if (file[0] != '/') return file;  // already relative (Bazel's __FILE__)
  const char* best = nullptr;
  for (const char* marker : {"/core/", "/layers/", "/parallel/", "/examples/",
                             "/tests/", "/bench/"}) {
    const char* hit = std::strstr(file, marker);
    if (hit != nullptr && (best == nullptr || hit < best)) best = hit;
  }
  return best != nullptr ? best + 1 : file;
}
}  // namespace

std::string FormatCheckFailure(const char* file, int line,
                               const char* expression,
                               const std::string& library_error,
                               const std::string& message) {
  std::ostringstream out;
  out << (message.empty() ? std::string("check failed") : message);
  if (!library_error.empty()) out << ": " << library_error;
  out << " [" << expression << " at " << ShortPath(file) << ":" << line << "]";
  return out.str();
}

CheckFailure::CheckFailure(const char* file, int line, const char* expression,
                           std::string library_error, std::string message)
    : file_(file),
      line_(line),
      expression_(expression),
      library_error_(std::move(library_error)) {
  message_ << message;
}

CheckFailure::~CheckFailure() noexcept(false) {
  // Never throw on top of an exception already unwinding (it would terminate).
  if (std::uncaught_exceptions() > 0) return;
  throw Error(FormatCheckFailure(file_, line_, expression_, library_error_,
                                 message_.str()));
}

}  // namespace internal
}  // namespace tandem
