#include "tests/support/rank_values.h"

#include <cstring>

#include "core/backend_registry.h"
#include "core/ops.h"
#include "tests/support/sanitizer.h"

namespace tandem {
namespace testing {

std::vector<float> RankValues(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = rank + i * 0.5f;
  return values;
}

std::string Mismatches(const std::vector<float>& got,
                       const std::function<float(int64_t)>& expected) {
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const float want = expected(i);
    if (got[static_cast<size_t>(i)] == want) continue;
    if (++bad <= 3) {
      first += " [" + std::to_string(i) + "] " + std::to_string(got[static_cast<size_t>(i)]) +
               " != " + std::to_string(want);
    }
  }
  return bad == 0 ? "" : std::to_string(bad) + " wrong:" + first;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

Tensor OnDevice(std::vector<float> values, Device device) {
  if (values.empty()) values.push_back(-1.f);
  const int64_t n = static_cast<int64_t>(values.size());
  return Tensor::FromVector(values, {n}, device);
}

std::vector<float> FirstN(const Tensor& t, int64_t n) {
  std::vector<float> host = t.ToVector();
  host.resize(static_cast<size_t>(n));
  return host;
}

std::string NeedGpus(int n) {
  const int found = CudaDeviceCount();
  if (found >= n) return "";
  std::string why = "needs " + std::to_string(n) + " GPU(s), found " + std::to_string(found);
  if (found == 0) why += " (" + CudaUnavailableReason() + ")";
  return why;
}

void KeepBusy(const Lane& lane, Device device) {
  const int64_t m = BusyGemmSide();
  Tensor a = Tensor::Full({m, m}, 1e-3f, device);
  Tensor c = Tensor::Empty({m, m}, device);
  ops::WaitFor(lane, MainLane(device));  // a's fill
  for (int i = 0; i < 10; ++i) ops::Gemm(lane, a, false, a, false, c);
  // a and c go back to the allocator on the main lane, which must not reuse
  // them before the GEMMs have run.
  ops::WaitFor(MainLane(device), lane);
}

}  // namespace testing
}  // namespace tandem
