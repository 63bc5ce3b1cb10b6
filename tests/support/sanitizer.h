// What tests adjust when they run under compute-sanitizer.
// tools/device/run_sanitizers.sh sets TANDEM_UNDER_SANITIZER. The tool runs
// every kernel orders of magnitude slower, so work that tests queue only to
// keep a stream busy (to prove that something else waits for it) can be far
// smaller there and still be pending when waited on, while the full size
// would take the racecheck tool hours.
#ifndef TANDEM_TESTS_SUPPORT_SANITIZER_H_
#define TANDEM_TESTS_SUPPORT_SANITIZER_H_

#include <cstdint>
#include <cstdlib>

namespace tandem {
namespace testing {

inline bool UnderSanitizer() { return std::getenv("TANDEM_UNDER_SANITIZER") != nullptr; }

// The side of the square fp32 GEMMs such tests chain: 4096 (a few ms each on
// an H200), 512 under the tool.
inline int64_t BusyGemmSide() { return UnderSanitizer() ? 512 : 4096; }

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_SANITIZER_H_
