#include "bench/gpu_step_common.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/event.h"

namespace tandem {
namespace bench_step {

using Clock = std::chrono::steady_clock;

ModelSpec LargeModel() {
  return {"large", {1024, 4096, 4096, 4096, 4096, 1024}, false, {512, 4096}};
}
ModelSpec SmallModel() { return {"small", {784, 1024, 1024, 10}, true, {256}}; }

cudaStream_t Stream() { return cuda::NativeStream(GetBackend(kDevice).main_lane()); }

void Cool(const Options& o) {
  if (o.cool_ms <= 0) return;
  GetBackend(kDevice).Synchronize(GetBackend(kDevice).main_lane());
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.cool_ms));
}

int64_t CudaMallocCount() {
  return GetBackend(kDevice).allocator().stats().system_allocations;
}

Tensor RandomTensor(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::Empty(shape, kDevice);
  Tensor flat = t.Flatten();
  const int64_t n = t.numel();
  const int64_t block = std::min<int64_t>(n, int64_t{1} << 20);
  std::vector<float> host(static_cast<size_t>(block));
  for (float& v : host) v = rng.Normal();
  flat.Slice(0, block).CopyFrom(Tensor::FromVector(host, {block}));
  for (int64_t offset = block; offset < n; offset += block) {
    const int64_t len = std::min(block, n - offset);
    flat.Slice(offset, offset + len).CopyFrom(flat.Slice(0, len));
  }
  return t;
}

Timing TimeSteps(int steps, int repeats, int& k, const std::function<void(int)>& step) {
  cuda::Event start = cuda::Event::Timing(), stop = cuda::Event::Timing();
  std::vector<double> gpu, host;
  for (int r = 0; r < repeats; ++r) {
    start.Record(Stream());
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) step(k++);
    host.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() /
                   steps);
    stop.Record(Stream());
    gpu.push_back(stop.ElapsedMsSince(start) / steps);
  }
  return {bench::Median(gpu), bench::Median(host), steps};
}

int StepsFor(const Options& o, double step_ms) {
  if (o.steps > 0) return o.steps;
  return static_cast<int>(std::clamp(o.target_ms / std::max(step_ms, 1e-3), 10.0, 2000.0));
}

}  // namespace bench_step
}  // namespace tandem
