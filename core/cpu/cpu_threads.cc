#include "core/cpu/cpu_threads.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/check.h"

namespace tandem {
namespace cpu {
namespace {

std::atomic<int> explicit_threads{0};  // SetCpuThreads; 0: unset
std::atomic<int> sized_threads{0};     // SizeCpuThreadsForWorkers; 0: unset

// TANDEM_CPU_THREADS, or 0 when unset or empty.
int EnvironmentThreads() {
  const char* text = std::getenv("TANDEM_CPU_THREADS");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  TANDEM_CHECK(*end == '\0' && n >= 1 && n <= 4096)
      << "TANDEM_CPU_THREADS=" << text
      << " is not a thread count: set a positive integer, or unset it to use "
         "one thread per core and worker";
  return static_cast<int>(n);
}

}  // namespace

void SetCpuThreads(int n) {
  TANDEM_CHECK(n >= 0) << "--cpu_threads=" << n
                       << ": give a positive thread count, or 0 for the default";
  explicit_threads.store(n);
}

void SizeCpuThreadsForWorkers(int workers) {
  TANDEM_CHECK(workers >= 1) << "SizeCpuThreadsForWorkers: " << workers
                             << " workers; need at least 1";
  sized_threads.store(std::max(1, HardwareThreads() / workers));
}

int CpuThreads() {
  if (const int n = explicit_threads.load(); n > 0) return n;
  if (const int n = EnvironmentThreads(); n > 0) return n;
  if (const int n = sized_threads.load(); n > 0) return n;
  return HardwareThreads();
}

int HardwareThreads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace cpu
}  // namespace tandem
