// The GEMMs of one MLP training step (forward, weight gradient, input
// gradient per Linear layer) timed under several issue strategies, to find
// where the single-GPU step's GEMM time can still come from:
//
//   serial_sgemm   cublasGemmEx on one stream (cublasSgemm's kernels in
//                  fp32).
//   serial_lt      cublasLt, its heuristic's first algorithm: should match.
//   serial_tuned   cublasLt, the fastest of the heuristic's top --candidates
//                  algorithms per shape, timed here.
//   split_*        the same, with each layer's weight-gradient GEMM on a
//                  second stream (event-ordered) so it runs beside the input
//                  gradient GEMM, which the next layer's backward waits for.
//
// Each strategy is timed with and without the first layer's input gradient
// (nothing needs it when the input is data). --dz_transposed takes each
// weight gradient from a transposed copy of dz (an NN product dzT x instead
// of dz^T x), as Linear does where the backend wants it (TF32 on sm_90); the
// default follows the step: on for tf32, off otherwise. --cool_ms idles the
// GPU before the square GEMM and before each strategy's timing, so that short
// runs (--reps=1) are timed from the clock state the square rate is measured
// in; "pct_square" is a strategy's counted rate over the square GEMM's.
// --precision picks the math: fp32 (CUBLAS_COMPUTE_32F, no TF32), tf32
// (float32 operands, TF32 tensor cores) or bf16 (bfloat16 operands and
// outputs, float32 accumulation; the weight-gradient GEMM adds into float32
// weights, as SGD in backward does).
// The square GEMM of --square_size in the same precision gives the rate the
// step's GEMMs are held against. Prints "gemm ..." per shape and
// "result ..." per strategy.
//
//   bazel-out/k8-opt/bin/bench/gemm_strategy_bench --model=large --batch=512
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/bench_util.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/event.h"
#include "core/cuda/stream.h"

namespace tandem {
namespace {

// A row-major GEMM C[m, n] = alpha op(A) op(B) + beta C, as the backend
// issues it (Linear: forward x w^T, weight gradient dz^T x, input gradient
// dz w).
struct GemmShape {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float beta;
  // A and B hold `in`, C and D `out`; the math is `compute`.
  cudaDataType_t in, out;
  cublasComputeType_t compute;
  auto Key() const {
    return std::make_tuple(trans_a, trans_b, m, n, k, beta, static_cast<int>(in),
                           static_cast<int>(out), static_cast<int>(compute));
  }
  std::string Text() const {
    return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + "_m" +
           std::to_string(m) + "_n" + std::to_string(n) + "_k" +
           std::to_string(k) + (beta != 0.f ? "_acc" : "");
  }
};

// Device memory for one operand, filled with N(0, 1) values of the GEMM's
// input type: GEMMs on zeros run faster than on data (the GPU holds a higher
// clock), so zeros would overstate the rates.
class DeviceBuffer {
 public:
  // Zeros: room for `floats` float32 values (the cuBLAS workspace).
  explicit DeviceBuffer(int64_t floats) {
    CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(floats) * sizeof(float)));
    CUDA_CHECK(cudaMemset(data_, 0, static_cast<size_t>(floats) * sizeof(float)));
  }
  // Random values: room for `floats` float32 values (bfloat16 operands use
  // half of it).
  DeviceBuffer(int64_t floats, cudaDataType_t type, Rng& rng) {
    const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
    CUDA_CHECK(cudaMalloc(&data_, bytes));
    FillNormal(type == CUDA_R_16BF ? sizeof(uint16_t) : sizeof(float), bytes, rng);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return static_cast<float*>(data_); }

 private:
  // One block of random values, copied over the whole buffer.
  void FillNormal(size_t value_bytes, size_t bytes, Rng& rng) {
    std::vector<unsigned char> block(std::min<size_t>(bytes, size_t{4} << 20));
    for (size_t at = 0; at + value_bytes <= block.size(); at += value_bytes) {
      const float v = rng.Normal();
      if (value_bytes == sizeof(float)) {
        std::memcpy(&block[at], &v, sizeof(v));
      } else {
        const uint16_t bits = FloatToBFloat16Bits(v);
        std::memcpy(&block[at], &bits, sizeof(bits));
      }
    }
    auto* out = static_cast<unsigned char*>(data_);
    for (size_t at = 0; at < bytes; at += block.size()) {
      CUDA_CHECK(cudaMemcpy(out + at, block.data(), std::min(block.size(), bytes - at),
                            cudaMemcpyHostToDevice));
    }
  }

  void* data_ = nullptr;
};

// cublasLt descriptors for one shape, in cuBLAS's column-major view (C^T =
// op(B)^T op(A)^T, B passed first), plus the algorithm chosen for it.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
};

class GemmRunner {
 public:
  GemmRunner(int64_t workspace_bytes) : workspace_(workspace_bytes / 4 + 1),
                                        workspace_bytes_(workspace_bytes) {
    CUBLAS_CHECK(cublasCreate(&blas_));
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_.get(), workspace_bytes_));
  }
  ~GemmRunner() {
    for (auto& [key, plan] : plans_) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.c);
      cublasLtMatmulDescDestroy(plan.desc);
    }
    cublasLtDestroy(lt_);
    cublasDestroy(blas_);
  }

  void GemmEx(cudaStream_t stream, const GemmShape& s, const float* a,
             const float* b, float* c) {
    const float alpha = 1.f;
    CUBLAS_CHECK(cublasSetStream(blas_, stream));
    CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_.get(), workspace_bytes_));
    CUBLAS_CHECK(cublasGemmEx_64(
        blas_, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, s.in,
        s.trans_b ? s.k : s.n, a, s.in, s.trans_a ? s.m : s.k, &s.beta, c, s.out, s.n,
        s.compute, CUBLAS_GEMM_DEFAULT))
        << s.Text();
  }

  LtPlan& Plan(const GemmShape& s, int candidates) {
    auto it = plans_.find(s.Key());
    if (it != plans_.end()) return it->second;
    LtPlan plan;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, s.compute, CUDA_R_32F));
    const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
    // Stored shapes, column-major: B is [k, n] row-major unless transposed.
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, s.in,
                                            s.trans_b ? s.k : s.n,
                                            s.trans_b ? s.n : s.k,
                                            s.trans_b ? s.k : s.n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, s.in,
                                            s.trans_a ? s.m : s.k,
                                            s.trans_a ? s.k : s.m,
                                            s.trans_a ? s.m : s.k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, s.out, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = static_cast<uint64_t>(workspace_bytes_);
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    plan.candidates.resize(static_cast<size_t>(std::max(1, candidates)));
    int returned = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(
        lt_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
        static_cast<int>(plan.candidates.size()), plan.candidates.data(), &returned))
        << s.Text();
    cublasLtMatmulPreferenceDestroy(pref);
    TANDEM_CHECK(returned > 0) << "no cublasLt algorithm for " << s.Text();
    plan.candidates.resize(static_cast<size_t>(returned));
    plan.algo = plan.candidates[0].algo;
    return plans_.emplace(s.Key(), std::move(plan)).first->second;
  }

  void Lt(cudaStream_t stream, const GemmShape& s, const cublasLtMatmulAlgo_t& algo,
          const float* a, const float* b, float* c) {
    LtPlan& plan = Plan(s, 1);
    const float alpha = 1.f;
    CUBLAS_CHECK(cublasLtMatmul(lt_, plan.desc, &alpha, b, plan.a, a, plan.b,
                                &s.beta, c, plan.c, c, plan.c, &algo,
                                workspace_.get(), workspace_bytes_, stream))
        << s.Text();
  }

 private:
  DeviceBuffer workspace_;
  int64_t workspace_bytes_;
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  std::map<decltype(GemmShape{}.Key()), LtPlan> plans_;
};

// Milliseconds per call of `fn` on `stream`: median of 5 timed runs of
// `reps` calls, after 3 untimed calls, which follow `cool_ms` of idling.
template <typename Fn>
double TimeMs(cudaStream_t stream, int reps, double cool_ms, Fn fn) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (cool_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(cool_ms));
  }
  cuda::Event start = cuda::Event::Timing(), stop = cuda::Event::Timing();
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    start.Record(stream);
    for (int i = 0; i < reps; ++i) fn();
    stop.Record(stream);
    runs.push_back(stop.ElapsedMsSince(start) / reps);
  }
  return bench::Median(runs);
}

struct Layer {
  int64_t in, out;
};

struct Options {
  std::string model = "large";
  int64_t batch = 512;
  int reps = 20, candidates = 16;
  int64_t workspace_mb = 32, square_size = 8192;
  std::string precision = "fp32", dz_transposed = "step";
  double cool_ms = 0;
};

void AddOptions(CLI::App& app, Options& o) {
  app.add_option("--model", o.model,
                 "large (1024 -> 4 x 4096 -> 1024) or small (784 -> 1024 -> 1024 -> 10)");
  app.add_option("--batch", o.batch, "rows per GEMM");
  app.add_option("--reps", o.reps, "steps per timed run");
  app.add_option("--candidates", o.candidates, "cublasLt heuristic algorithms tried per shape");
  app.add_option("--workspace_mb", o.workspace_mb, "cuBLAS workspace");
  app.add_option("--precision", o.precision, "fp32, tf32 or bf16");
  app.add_option("--square_size", o.square_size, "size of the square reference GEMM (0: none)");
  app.add_option("--dz_transposed", o.dz_transposed,
                 "weight gradients from a transposed copy of dz: on, off or step (on for tf32)");
  app.add_option("--cool_ms", o.cool_ms, "idle the GPU this long before every timing");
}

void CheckOptions(const Options& o) {
  TANDEM_CHECK(o.precision == "fp32" || o.precision == "tf32" || o.precision == "bf16")
      << "--precision must be fp32, tf32 or bf16, not '" << o.precision << "'";
  TANDEM_CHECK(o.dz_transposed == "on" || o.dz_transposed == "off" || o.dz_transposed == "step")
      << "--dz_transposed must be on, off or step, not '" << o.dz_transposed << "'";
  TANDEM_CHECK(o.model == "large" || o.model == "small")
      << "--model must be large or small, not '" << o.model << "'";
}

std::vector<Layer> Layers(const std::string& model) {
  const std::vector<int64_t> sizes = model == "large"
                                         ? std::vector<int64_t>{1024, 4096, 4096, 4096, 4096, 1024}
                                         : std::vector<int64_t>{784, 1024, 1024, 10};
  std::vector<Layer> layers;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) layers.push_back({sizes[i], sizes[i + 1]});
  return layers;
}

// The square GEMM's rate in TFLOP/s, printed as a "square" row.
double SquareTflops(GemmRunner& runner, cudaStream_t stream, const Options& o,
                    cudaDataType_t act, cublasComputeType_t compute, Rng& rng,
                    bench::ResultPrinter& results) {
  const int64_t n = o.square_size;
  const GemmShape sq{false, false, n, n, n, 0.f, act, act, compute};
  DeviceBuffer a(n * n, act, rng), b(n * n, act, rng), c(n * n, act, rng);
  const double ms =
      TimeMs(stream, 5, o.cool_ms, [&] { runner.GemmEx(stream, sq, a.get(), b.get(), c.get()); });
  const double tflops = 2.0 * n * n * n / ms / 1e9;
  bench::Row row("square");
  row.Add("precision", o.precision).Add("size", n).Add("ms", ms, 3).Add("tflops", tflops, 1);
  results.Print(row);
  return tflops;
}

// Per shape: sgemm against the Lt default against the best of the Lt
// candidates, printed as "gemm" rows; the best algorithm is kept in the
// shape's plan for the step strategies.
void TuneShapes(GemmRunner& runner, cudaStream_t stream, const std::vector<GemmShape>& shapes,
                const Options& o, Rng& rng, bench::ResultPrinter& results) {
  // Scratch operands big enough for any shape; C is float32 where a weight
  // gradient accumulates into it.
  const cudaDataType_t act = shapes.front().in;
  const int64_t biggest = std::max<int64_t>(o.batch, 4096) * 4096;
  DeviceBuffer big_a(biggest, act, rng), big_b(biggest, act, rng),
      big_c(biggest, CUDA_R_32F, rng);
  std::map<decltype(shapes[0].Key()), bool> seen;
  for (const GemmShape& s : shapes) {
    if (seen[s.Key()]) continue;
    seen[s.Key()] = true;
    LtPlan& plan = runner.Plan(s, o.candidates);
    const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
    const double sgemm = TimeMs(stream, o.reps, 0, [&] {
      runner.GemmEx(stream, s, big_a.get(), big_b.get(), big_c.get());
    });
    double best = 1e30;
    int best_index = 0;
    std::vector<double> times;
    for (size_t c = 0; c < plan.candidates.size(); ++c) {
      const double t = TimeMs(stream, o.reps, 0, [&] {
        runner.Lt(stream, s, plan.candidates[c].algo, big_a.get(), big_b.get(), big_c.get());
      });
      times.push_back(t);
      if (t < best) best = t, best_index = static_cast<int>(c);
    }
    plan.algo = plan.candidates[static_cast<size_t>(best_index)].algo;
    bench::Row row("gemm");
    row.Add("shape", s.Text()).Add("gflop", gflop, 2).Add("sgemm_ms", sgemm, 4)
        .Add("lt_default_ms", times[0], 4).Add("lt_best_ms", best, 4)
        .Add("best_index", best_index).Add("of", static_cast<int64_t>(plan.candidates.size()))
        .Add("sgemm_tflops", gflop / sgemm, 2).Add("best_tflops", gflop / best, 2);
    results.Print(row);
  }
}

// Per layer: weight [out, in], its gradient, the input [batch, in], the
// output/gradient [batch, out]. A layer's input gradient is written into the
// previous layer's output-gradient buffer, its output into the next layer's
// input.
struct StepBuffers {
  StepBuffers(const std::vector<Layer>& layers, int64_t batch, cudaDataType_t act, Rng& rng)
      : dx0(batch * layers[0].in, act, rng) {
    for (const Layer& l : layers) {
      w.push_back(std::make_unique<DeviceBuffer>(l.out * l.in, act, rng));
      dw.push_back(std::make_unique<DeviceBuffer>(l.out * l.in, CUDA_R_32F, rng));
      x.push_back(std::make_unique<DeviceBuffer>(batch * l.in, act, rng));
      dz.push_back(std::make_unique<DeviceBuffer>(batch * l.out, act, rng));
    }
  }
  // The last layer's output goes to its own dz buffer.
  float* ForwardOut(size_t i) const {
    return i + 1 < x.size() ? x[i + 1]->get() : dz.back()->get();
  }
  float* InputGradOut(size_t i) const { return i > 0 ? dz[i - 1]->get() : dx0.get(); }

  std::vector<std::unique_ptr<DeviceBuffer>> w, dw, x, dz;
  DeviceBuffer dx0;
};

enum class Api { kSgemm, kLtDefault, kLtTuned };

// Times step(api, split, skip_first_dx) under every strategy, printed as
// "result" rows.
void TimeStrategies(cudaStream_t stream, const Options& o, bool dz_transposed,
                    double flops_counted, double square_tflops,
                    const std::function<void(Api, bool, bool)>& step,
                    bench::ResultPrinter& results) {
  const std::vector<std::pair<std::string, Api>> apis = {
      {"sgemm", Api::kSgemm}, {"lt", Api::kLtDefault}, {"tuned", Api::kLtTuned}};
  for (bool skip : {false, true}) {
    for (bool split : {false, true}) {
      for (const auto& [name, api] : apis) {
        const double ms = TimeMs(stream, o.reps, o.cool_ms, [&] { step(api, split, skip); });
        bench::Row row("result");
        row.Add("strategy", (split ? "split_" : "serial_") + name)
            .Add("skip_first_dx", skip ? 1 : 0).Add("model", o.model).Add("batch", o.batch)
            .Add("precision", o.precision).Add("dz_transposed", dz_transposed ? 1 : 0)
            .Add("gemm_ms", ms, 4).Add("counted_tflops", flops_counted / ms / 1e9, 2);
        if (square_tflops > 0) {
          row.Add("pct_square", 100.0 * flops_counted / ms / 1e9 / square_tflops, 1);
        }
        results.Print(row);
      }
    }
  }
}

int Run(int argc, char** argv) {
  Options o;
  CLI::App app{"Tandem: strategies for the GEMMs of one MLP training step"};
  AddOptions(app, o);
  CLI11_PARSE(app, argc, argv);
  CheckOptions(o);
  const bool dz_transposed =
      o.dz_transposed == "on" || (o.dz_transposed == "step" && o.precision == "tf32");
  // Activations (and their gradients) are bfloat16 in bf16; the weights
  // the weight-gradient GEMM updates stay float32.
  const cudaDataType_t act = o.precision == "bf16" ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      o.precision == "tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const std::vector<Layer> layers = Layers(o.model);
  const int64_t batch = o.batch;

  Rng rng(1);
  StepBuffers buffers(layers, batch, act, rng);
  auto forward = [&](size_t i) {
    return GemmShape{false, true, batch, layers[i].out, layers[i].in, 0.f, act, act, compute};
  };
  // dz^T x, or dzT x from a transposed copy (the step makes the copy in a
  // pass of its own, not timed here).
  auto weight_grad = [&](size_t i) {
    return GemmShape{!dz_transposed, false, layers[i].out, layers[i].in, batch, 1.f, act,
                     CUDA_R_32F, compute};
  };
  auto input_grad = [&](size_t i) {
    return GemmShape{false, false, batch, layers[i].in, layers[i].out, 0.f, act, act, compute};
  };

  cuda::Stream main_lane, side_lane;
  const cudaStream_t main_stream = main_lane.get(), side_stream = side_lane.get();
  cuda::Event scratch;  // orders one stream after the other (cuda::StreamWaitFor)

  GemmRunner runner(o.workspace_mb << 20);
  bench::ResultPrinter results;
  const double square_tflops =
      o.square_size > 0 ? SquareTflops(runner, main_stream, o, act, compute, rng, results) : 0;
  double flops_counted = 0;
  for (const Layer& l : layers) flops_counted += 6.0 * l.in * l.out * batch;

  std::vector<GemmShape> shapes;
  for (size_t i = 0; i < layers.size(); ++i) {
    shapes.push_back(forward(i));
    shapes.push_back(weight_grad(i));
    shapes.push_back(input_grad(i));
  }
  TuneShapes(runner, main_stream, shapes, o, rng, results);

  // The step's GEMMs under each strategy.
  auto issue = [&](Api api, cudaStream_t stream, const GemmShape& s, const float* a,
                   const float* b, float* c) {
    if (api == Api::kSgemm) return runner.GemmEx(stream, s, a, b, c);
    LtPlan& plan = runner.Plan(s, o.candidates);
    runner.Lt(stream, s, api == Api::kLtTuned ? plan.algo : plan.candidates[0].algo, a, b, c);
  };
  auto step = [&](Api api, bool split, bool skip_first_dx) {
    const StepBuffers& m = buffers;
    for (size_t i = 0; i < layers.size(); ++i) {
      issue(api, main_stream, forward(i), m.x[i]->get(), m.w[i]->get(), m.ForwardOut(i));
    }
    const cudaStream_t weight_stream = split ? side_stream : main_stream;
    for (size_t i = layers.size(); i-- > 0;) {
      if (split) cuda::StreamWaitFor(side_stream, main_stream, scratch);
      issue(api, weight_stream, weight_grad(i), m.dz[i]->get(), m.x[i]->get(), m.dw[i]->get());
      if (i > 0 || !skip_first_dx) {
        issue(api, main_stream, input_grad(i), m.dz[i]->get(), m.w[i]->get(), m.InputGradOut(i));
      }
    }
    if (split) cuda::StreamWaitFor(main_stream, side_stream, scratch);
  };
  TimeStrategies(main_stream, o, dz_transposed, flops_counted, square_tflops, step, results);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  return tandem::bench::RunMain([&] { return tandem::Run(argc, argv); });
}
