// Tandem's error checks: one generic macro, one family of named checks.
//
// Every check throws tandem::Error whose text carries the message, the
// library's error string where there is one, the failing expression and
// file:line, so tests can EXPECT_THROW and a user reads one line:
//
//   TANDEM_CHECK(n > 0) << "--workers must be at least 1, got " << n;
//   TANDEM_CHECK(x.rank() == 2, "input must be a matrix");
//   CUDA_CHECK(cudaMalloc(&p, bytes)) << "allocating " << bytes << " bytes";
//
// Library checks (CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, MPI_CHECK) live next
// to their backends and are all built on TANDEM_CHECK_GEN.
#ifndef TANDEM_CORE_CHECK_H_
#define TANDEM_CORE_CHECK_H_

#include <sstream>
#include <stdexcept>
#include <string>

namespace tandem {

// The one exception type Tandem throws for failed checks.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace internal {

// Collects a streamed message and throws tandem::Error when it is destroyed
// at the end of the check's statement. Only ever a temporary inside a check
// macro, never a member, so its throwing destructor is safe.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* expression,
               std::string library_error, std::string message = "");
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  ~CheckFailure() noexcept(false);

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  const char* expression_;
  std::string library_error_;
  std::ostringstream message_;
};

// Formats the text a failed check throws; exposed for tests.
std::string FormatCheckFailure(const char* file, int line,
                               const char* expression,
                               const std::string& library_error,
                               const std::string& message);

inline bool IsTrue(bool ok) { return ok; }
inline const char* NoLibraryError(bool) { return ""; }

}  // namespace internal
}  // namespace tandem

// The generic check. `status` is evaluated once; when is_ok(status) is false
// the statement throws, after streaming anything that follows with <<.
// The for-statement (rather than if/else) keeps the macro a single statement
// that cannot capture a caller's `else`.
#define TANDEM_CHECK_GEN(status_type, status, is_ok, error_string, expr_text, \
                         ...)                                                 \
  for (status_type tandem_check_status_ = (status);                           \
       !is_ok(tandem_check_status_);)                                         \
  ::tandem::internal::CheckFailure(__FILE__, __LINE__, expr_text,             \
                                   error_string(tandem_check_status_),        \
                                   ##__VA_ARGS__)

#define TANDEM_CHECK(cond, ...)                                           \
  TANDEM_CHECK_GEN(bool, static_cast<bool>(cond), ::tandem::internal::IsTrue, \
                   ::tandem::internal::NoLibraryError, #cond, ##__VA_ARGS__)

#endif  // TANDEM_CORE_CHECK_H_
