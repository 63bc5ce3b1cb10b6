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
// (nothing needs it when the input is data). --precision picks the math:
// fp32 (CUBLAS_COMPUTE_32F, no TF32), tf32 (float32 operands, TF32 tensor
// cores) or bf16 (bfloat16 operands and outputs, float32 accumulation; the
// weight-gradient GEMM adds into float32 weights, as SGD in backward does).
// The square GEMM of --square_size in the same precision gives the rate the
// step's GEMMs are held against. Prints "gemm ..." per shape and
// "result ..." per strategy.
//
//   bazel-out/k8-opt/bin/bench/gemm_strategy_bench --model=large --batch=512
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/bench_util.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"

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

class DeviceBuffer {
 public:
  // Room for `floats` float32 values (bfloat16 operands use half of it).
  explicit DeviceBuffer(int64_t floats) {
    CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(floats) * sizeof(float)));
    CUDA_CHECK(cudaMemset(data_, 0, static_cast<size_t>(floats) * sizeof(float)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return static_cast<float*>(data_); }

 private:
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
// `reps` calls, after 3 untimed calls.
template <typename Fn>
double TimeMs(cudaStream_t stream, int reps, Fn fn) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < reps; ++i) fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    runs.push_back(ms / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return bench::Median(runs);
}

struct Layer {
  int64_t in, out;
};

int Run(int argc, char** argv) {
  std::string model = "large";
  int64_t batch = 512;
  int reps = 20, candidates = 16;
  int64_t workspace_mb = 32, square_size = 8192;
  std::string precision = "fp32";
  CLI::App app{"Tandem: strategies for the GEMMs of one MLP training step"};
  app.add_option("--model", model, "large (1024 -> 4 x 4096 -> 1024) or small (784 -> 1024 -> 1024 -> 10)");
  app.add_option("--batch", batch, "rows per GEMM");
  app.add_option("--reps", reps, "steps per timed run");
  app.add_option("--candidates", candidates, "cublasLt heuristic algorithms tried per shape");
  app.add_option("--workspace_mb", workspace_mb, "cuBLAS workspace");
  app.add_option("--precision", precision, "fp32, tf32 or bf16");
  app.add_option("--square_size", square_size, "size of the square reference GEMM (0: none)");
  CLI11_PARSE(app, argc, argv);
  TANDEM_CHECK(precision == "fp32" || precision == "tf32" || precision == "bf16")
      << "--precision must be fp32, tf32 or bf16, not '" << precision << "'";
  const bool bf16 = precision == "bf16";
  // Activations (and their gradients) are bfloat16 in bf16; the weights
  // the weight-gradient GEMM updates stay float32.
  const cudaDataType_t act = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision == "tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  std::vector<int64_t> sizes;
  TANDEM_CHECK(model == "large" || model == "small")
      << "--model must be large or small, not '" << model << "'";
  if (model == "large") sizes = {1024, 4096, 4096, 4096, 4096, 1024};
  else sizes = {784, 1024, 1024, 10};
  std::vector<Layer> layers;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) layers.push_back({sizes[i], sizes[i + 1]});

  // Per layer: weight [out, in], its gradient, the input [batch, in], the
  // output/gradient [batch, out]. The input gradient is written into the
  // previous layer's output-gradient buffer.
  std::vector<std::unique_ptr<DeviceBuffer>> w, dw, x, dz;
  for (const Layer& l : layers) {
    w.push_back(std::make_unique<DeviceBuffer>(l.out * l.in));
    dw.push_back(std::make_unique<DeviceBuffer>(l.out * l.in));
    x.push_back(std::make_unique<DeviceBuffer>(batch * l.in));
    dz.push_back(std::make_unique<DeviceBuffer>(batch * l.out));
  }
  DeviceBuffer dx0(batch * layers[0].in);
  auto forward = [&](size_t i) {
    return GemmShape{false, true, batch, layers[i].out, layers[i].in, 0.f, act, act, compute};
  };
  auto weight_grad = [&](size_t i) {
    return GemmShape{true, false, layers[i].out, layers[i].in, batch, 1.f, act, CUDA_R_32F,
                     compute};
  };
  auto input_grad = [&](size_t i) {
    return GemmShape{false, false, batch, layers[i].in, layers[i].out, 0.f, act, act, compute};
  };
  float* const y_last = dz.back()->get();  // forward output of the last layer
  auto fwd_out = [&](size_t i) { return i + 1 < layers.size() ? x[i + 1]->get() : y_last; };
  auto dx_out = [&](size_t i) { return i > 0 ? dz[i - 1]->get() : dx0.get(); };

  cudaStream_t main_stream, side_stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ready(layers.size());
  for (auto& e : ready) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaEvent_t side_done;
  CUDA_CHECK(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));

  GemmRunner runner(workspace_mb << 20);
  bench::ResultPrinter results;
  if (square_size > 0) {
    const GemmShape sq{false, false, square_size, square_size, square_size, 0.f, act, act,
                       compute};
    DeviceBuffer a(square_size * square_size), b(square_size * square_size),
        c(square_size * square_size);
    const double ms = TimeMs(main_stream, 5, [&] {
      runner.GemmEx(main_stream, sq, a.get(), b.get(), c.get());
    });
    bench::Row row("square");
    row.Add("precision", precision).Add("size", square_size).Add("ms", ms, 3)
        .Add("tflops", 2.0 * square_size * square_size * square_size / ms / 1e9, 1);
    results.Print(row);
  }
  double flops_counted = 0;
  for (const Layer& l : layers) flops_counted += 6.0 * l.in * l.out * batch;

  // Per-shape: sgemm vs Lt default vs Lt best-of-candidates; the tuned
  // algorithm is kept in the plan for the step strategies below.
  std::vector<GemmShape> shapes;
  for (size_t i = 0; i < layers.size(); ++i) {
    shapes.push_back(forward(i));
    shapes.push_back(weight_grad(i));
    shapes.push_back(input_grad(i));
  }
  // Per-shape timing reads and writes scratch buffers big enough for any
  // operand (values do not matter to the timing).
  const int64_t biggest = std::max<int64_t>(batch, 4096) * 4096;
  DeviceBuffer big_a(biggest), big_b(biggest), big_c(biggest);
  std::map<decltype(shapes[0].Key()), bool> seen;
  for (const GemmShape& s : shapes) {
    if (seen[s.Key()]) continue;
    seen[s.Key()] = true;
    LtPlan& plan = runner.Plan(s, candidates);
    const double gflop = 2.0 * s.m * s.n * s.k / 1e9;
    const double sgemm = TimeMs(main_stream, reps, [&] {
      runner.GemmEx(main_stream, s, big_a.get(), big_b.get(), big_c.get());
    });
    double best = 1e30;
    int best_index = 0;
    std::vector<double> times;
    for (size_t c = 0; c < plan.candidates.size(); ++c) {
      const double t = TimeMs(main_stream, reps, [&] {
        runner.Lt(main_stream, s, plan.candidates[c].algo, big_a.get(), big_b.get(),
                  big_c.get());
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

  // The step's GEMMs under each strategy.
  enum class Api { kSgemm, kLtDefault, kLtTuned };
  auto issue = [&](Api api, cudaStream_t stream, const GemmShape& s, const float* a,
                   const float* b, float* c) {
    if (api == Api::kSgemm) return runner.GemmEx(stream, s, a, b, c);
    LtPlan& plan = runner.Plan(s, candidates);
    runner.Lt(stream, s, api == Api::kLtTuned ? plan.algo : plan.candidates[0].algo, a, b, c);
  };
  auto step = [&](Api api, bool split, bool skip_first_dx) {
    for (size_t i = 0; i < layers.size(); ++i) {
      issue(api, main_stream, forward(i), x[i]->get(), w[i]->get(), fwd_out(i));
    }
    for (size_t i = layers.size(); i-- > 0;) {
      if (split) {
        CUDA_CHECK(cudaEventRecord(ready[i], main_stream));
        CUDA_CHECK(cudaStreamWaitEvent(side_stream, ready[i], 0));
        issue(api, side_stream, weight_grad(i), dz[i]->get(), x[i]->get(), dw[i]->get());
      } else {
        issue(api, main_stream, weight_grad(i), dz[i]->get(), x[i]->get(), dw[i]->get());
      }
      if (i > 0 || !skip_first_dx) {
        issue(api, main_stream, input_grad(i), dz[i]->get(), w[i]->get(), dx_out(i));
      }
    }
    if (split) {
      CUDA_CHECK(cudaEventRecord(side_done, side_stream));
      CUDA_CHECK(cudaStreamWaitEvent(main_stream, side_done, 0));
    }
  };
  const std::vector<std::pair<std::string, Api>> apis = {
      {"sgemm", Api::kSgemm}, {"lt", Api::kLtDefault}, {"tuned", Api::kLtTuned}};
  for (bool skip : {false, true}) {
    for (bool split : {false, true}) {
      for (const auto& [name, api] : apis) {
        const double ms = TimeMs(main_stream, reps, [&] { step(api, split, skip); });
        bench::Row row("result");
        row.Add("strategy", (split ? "split_" : "serial_") + name)
            .Add("skip_first_dx", skip ? 1 : 0).Add("model", model).Add("batch", batch)
            .Add("precision", precision)
            .Add("gemm_ms", ms, 4).Add("counted_tflops", flops_counted / ms / 1e9, 2);
        results.Print(row);
      }
    }
  }
  for (auto& e : ready) cudaEventDestroy(e);
  cudaEventDestroy(side_done);
  cudaStreamDestroy(side_stream);
  cudaStreamDestroy(main_stream);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  return tandem::bench::RunMain([&] { return tandem::Run(argc, argv); });
}
