// What bench/gpu_step_bench.cc and its GEMMs-alone measurements
// (bench/gpu_step_gemms.h) share: the models, the options its flags set, the
// device and its main lane's stream, random tensors on the device, and
// timing with CUDA events on that stream.
//
//   using namespace tandem::bench_step;
//   Options o;  // as the flags set it
//   Rng rng(o.seed);
//   Tensor a = RandomTensor({4096, 4096}, rng), b = RandomTensor({4096, 4096}, rng);
//   Tensor c = RandomTensor({4096, 4096}, rng);  // all on kDevice, cuda:0
//   auto step = [&](int) { ops::Gemm(a, false, b, false, c); };  // on Stream()
//   int k = 0;
//   const Timing probe = TimeSteps(3, 1, k, step);  // also the warm-up
//   Cool(o);  // idles o.cool_ms first, when set
//   const Timing t = TimeSteps(StepsFor(o, probe.gpu_ms), o.repeats, k, step);
//   // t.gpu_ms: the median run's device time per step; t.host_ms: to enqueue
//
// Everything here uses cuda:0 (kDevice); the caller has made it current.
#ifndef TANDEM_BENCH_GPU_STEP_COMMON_H_
#define TANDEM_BENCH_GPU_STEP_COMMON_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/precision.h"

namespace tandem {
namespace bench_step {

struct ModelSpec {
  std::string name;
  std::vector<int64_t> sizes;  // {in, hidden..., out}
  bool one_hot_targets;
  std::vector<int64_t> default_batches;
};

ModelSpec LargeModel();
ModelSpec SmallModel();

struct Options {
  int warmup = 5;
  int steps = 0;  // 0: enough for about --target_ms per run
  double target_ms = 200;
  int repeats = 5;
  int sets = 4;
  int check_steps = 8;
  bool graph = false;
  bool gemm = true;
  // fp32, tf32 or bf16 (layers/precision.h); --tf32 means tf32.
  Precision precision = Precision::kFp32;
  int64_t sgemm_size = 8192;
  // After the burst rates, --precision's square GEMM rate again once the
  // GPU has run it back to back this long (0: not measured).
  double sustain_ms = 3000;
  // The GPU idles this long before each burst rate and before the timed
  // steps (0: not), so that with short runs (--steps) both are timed from
  // the same state of the clock (see the header of bench/gpu_step_bench.cc).
  double cool_ms = 0;
  float lr = 1e-3f;
  uint64_t seed = 42;
  // How Backward writes gradients (BackwardArgs): accumulate (ZeroGrad, then
  // Backward adds, then Sgd::Step), overwrite (no ZeroGrad) or fused_sgd
  // (Sgd::in_backward: no gradients, no Step pass).
  std::string grads = "fused_sgd";
  // Where the weight gradients (or updates) run: side (beside the
  // input-gradient GEMMs, BackwardArgs::For) or main (one lane: a layer's
  // Backward then drops its input and dz as it returns).
  std::string param_lane = "side";
};

inline const Device kDevice = Device::Cuda(0);

// The stream of kDevice's main lane.
cudaStream_t Stream();

// Lets the GPU idle for o.cool_ms once what is queued has run.
void Cool(const Options& o);

// cudaMalloc calls of kDevice's allocator so far.
int64_t CudaMallocCount();

// N(0, 1) values on the device. Large tensors repeat a random block of 2^20
// values (generated on the host, copied on the device): random enough for
// timing, without seconds of host-side sampling.
Tensor RandomTensor(const Shape& shape, Rng& rng);

// Median over `repeats` runs of `steps` calls of `step(k)` (k counts on
// across runs), timed with events on the main lane's stream.
struct Timing {
  double gpu_ms = 0;   // per step, between events on the stream
  double host_ms = 0;  // per step, to enqueue
  int steps = 0;
};

Timing TimeSteps(int steps, int repeats, int& k, const std::function<void(int)>& step);

// Steps per run: --steps, or enough for about --target_ms.
int StepsFor(const Options& o, double step_ms);

// TFLOP/s of `flops` done in `ms`.
inline double Tflops(double flops, double ms) { return flops / (ms * 1e-3) / 1e12; }

}  // namespace bench_step
}  // namespace tandem

#endif  // TANDEM_BENCH_GPU_STEP_COMMON_H_
