// Single-GPU training-step benchmark: Tandem's MLP step (Forward, MSE,
// Backward, SGD; with --grads=accumulate also ZeroGrad) on cuda:0, side by
// side with the cuBLAS SGEMM rate measured in the same process, on the same
// device.
//
//   bazel build -c opt //bench:gpu_step_bench
//   bazel-bin/bench/gpu_step_bench --model=all --graph
//   bazel-bin/bench/gpu_step_bench --model=large --batch=4096 --steps=20
//
// Models (bench/torch_reference.py builds the same ones):
//   large: 1024 → 4×4096 → 1024 (58.7 M parameters), batches 512 and 4096;
//   small: 784 → 1024 → 1024 → 10 (1.86 M parameters), batch 256.
// ReLU after each hidden layer, MSE loss (mean over all elements) against
// N(0, 1) targets (large) or one-hot rows of random classes (small), plain
// SGD with lr 1e-3. Inputs are N(0, 1), on the device, in --sets distinct
// batches used in turn, so a step never finds last step's input in L2.
// --precision picks fp32 (the default; no TF32), tf32 (TF32 GEMMs) or bf16
// (bfloat16 activations and GEMMs, float32 masters and gradients; the input
// batches stay float32 and the first layer casts them, as autocast does).
// The 8192^3 GEMM rate of each precision is measured in the same process
// (--no_gemm skips it), at once (a burst of about 100 ms), and the run's own
// precision's again after --gemm_sustain_ms of the same GEMM back to back
// (sustained: under load the H200 holds its power limit at a lower clock, as
// during the timed steps; --cool_ms=1000 with runs of about 20 ms, e.g.
// --steps=5 for a 4 ms step, instead times the steps in bursts too, each
// after a second of idling). Each row gives its step's share of its
// precision's rate (pct_gemm, and pct_gemm_sustained) and the peak of the
// allocator's bytes in use for that configuration (peak_mb).
// --grads picks how the step handles gradients: fused_sgd (the default;
// Sgd::in_backward, plain SGD applied by each layer's weight-gradient GEMM),
// overwrite (Backward writes gradients, Sgd::Step applies them, no
// ZeroGrad) or accumulate (ZeroGrad, Backward adds into gradients,
// Sgd::Step: the textbook loop).
//
// Timing: --warmup untimed steps, then --repeats runs of --steps steps, each
// run timed with CUDA events recorded on the main lane's stream
// (cuda::NativeStream); step_ms is the median run's time per step. The
// host's time to enqueue the steps is reported too (host_ms): when it is
// close to step_ms, the step is bound by launch overhead, not by the GPU.
//
// --graph also captures one step per input set as a CUDA graph
// (cudaStreamBeginCapture on the main lane's stream, thread-local mode) and
// times graph replays. It first checks that K replays give the same
// parameters as K eager steps of an identically seeded model (see Note
// [Graph capture]).
//
// Output: "gemm ...", "copy ..." (device-to-device bandwidth, the memory
// ceiling), "check ..." and "result ..." key=value lines, then a table.
// TFLOP/s of a step counts 6 × parameters × batch FLOPs; pct_sgemm is that
// rate over the 8192³ SGEMM rate measured in this run. gemm_sum_ms adds
// up the model's GEMMs (as the step issues them: three per layer, two for
// the first) timed
// alone at the same shapes; gemm_share = gemm_sum_ms / step_ms.
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gpu_step_common.h"
#include "bench/gpu_step_gemms.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/precision.h"

namespace tandem {
namespace bench_step {
namespace {

// Inputs and targets, `sets` batches of each.
struct Batches {
  std::vector<Tensor> x, y;
};

Batches MakeBatches(const ModelSpec& spec, int64_t batch, int sets, uint64_t seed) {
  Rng rng(seed + 1);
  Batches b;
  const int64_t in = spec.sizes.front(), out = spec.sizes.back();
  for (int s = 0; s < sets; ++s) {
    b.x.push_back(RandomTensor({batch, in}, rng));
    if (spec.one_hot_targets) {
      std::vector<float> y(static_cast<size_t>(batch * out), 0.f);
      for (int64_t r = 0; r < batch; ++r) y[r * out + rng.UniformInt(out)] = 1.f;
      b.y.push_back(Tensor::FromVector(y, {batch, out}, kDevice));
    } else {
      b.y.push_back(RandomTensor({batch, out}, rng));
    }
  }
  return b;
}

// One model with its loss and optimizer; Step is one training step, exactly
// as a training loop issues it.
class Trainer {
 public:
  Trainer(const ModelSpec& spec, const Options& options) {
    Rng init(options.seed);
    MlpOptions mlp;
    mlp.device = kDevice;
    mlp.precision = options.precision;
    model_ = Mlp(spec.sizes, Activation::kRelu, init, mlp);
    SgdParams sgd;
    sgd.lr = options.lr;  // no momentum, no weight decay
    sgd_ = std::make_unique<Sgd>(model_->Parameters(), sgd);
    // The model's input is data: no input gradient for the first layer.
    args_ = BackwardArgs::For(kDevice);
    args_.input_grad = false;
    TANDEM_CHECK(options.param_lane == "side" || options.param_lane == "main")
        << "--param_lane must be side or main, got '" << options.param_lane << "'";
    if (options.param_lane == "main") args_.param_lane = args_.lane;
    if (options.grads == "fused_sgd") {
      args_.update = sgd_->in_backward();
      TANDEM_CHECK(args_.update != nullptr) << "SGD cannot run inside Backward here";
      args_.grad_mode = GradMode::kOverwrite;
      zero_grad_ = false;
    } else if (options.grads == "overwrite") {
      args_.grad_mode = GradMode::kOverwrite;
      zero_grad_ = false;
    } else {
      TANDEM_CHECK(options.grads == "accumulate")
          << "--grads must be accumulate, overwrite or fused_sgd, got '" << options.grads << "'";
    }
  }

  // Returns the loss, [1] on the device (not waited for).
  Tensor Step(const Tensor& x, const Tensor& y) {
    if (zero_grad_) sgd_->ZeroGrad();
    Tensor pred = model_->Forward(x);
    Tensor value = loss_.Forward(pred, y);
    model_->BackwardWith(loss_.Backward(), args_);
    sgd_->Step();
    return value;
  }

  Sequential& model() { return *model_; }

  std::vector<float> FlatParameters() {
    std::vector<float> all;
    for (NamedParameter& p : model_->Parameters()) {
      const std::vector<float> v = p.value().ToVector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }

 private:
  std::unique_ptr<Sequential> model_;
  MseLoss loss_;
  std::unique_ptr<Sgd> sgd_;
  BackwardArgs args_;
  bool zero_grad_ = true;
};

// Note [Graph capture]
// ~~~~~~~~~~~~~~~~~~~~
// A step captured on the main lane's stream bakes in every device pointer it
// used: parameters and gradients (long-lived, fine), the input batch (one
// graph per input set), and the activations and scratch the step allocated
// from the caching allocator during capture, which went back to the cache
// when the capturing step's tensors died. Replays write those blocks again.
// That is safe because (1) every step, eager or replayed, starts and ends on
// the main lane (its side-lane work forks from the main lane and joins it
// again before the step ends), so a replay never overlaps another user of a
// block (Note [Stream-ordered reuse]); and (2) a step reads no intermediate
// it did not write itself earlier in the same step, so a block shared by two
// graphs, or handed to an eager step in between, carries nothing across
// steps. What would break it: a tensor allocated after capture that must
// keep its value across replays (it may get a block a graph scribbles on);
// none is made here. Capture itself must not call cudaMalloc (thread-local
// capture mode forbids it): the warm-up steps fill the cache first, the
// caching allocator returns blocks LIFO per size class, and a repeated step
// makes the same requests, so capture is served from the cache;
// CaptureSteps checks the cudaMalloc count. Host-side effects (the optimizer's step counter) happen
// once, at capture, not per replay; plain SGD does not read it.
class Graph {
 public:
  // Captures what `fn` queues on `stream` (nothing runs) and instantiates it.
  Graph(cudaStream_t stream, const std::function<void()>& fn) {
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      fn();
    } catch (const std::exception& e) {
      // End the capture so the stream is usable again, then report fn's error.
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);
      if (broken != nullptr) cudaGraphDestroy(broken);
      cudaGetLastError();
      throw Error(std::string("during CUDA graph capture of a step (a cudaMalloc here means "
                              "the warm-up did not fill the allocator's cache): ") +
                  e.what());
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph_)) << "capturing a training step";
    CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes));
    std::vector<cudaGraphNode_t> all(nodes);
    if (nodes > 0) CUDA_CHECK(cudaGraphGetNodes(graph_, all.data(), &nodes));
    for (cudaGraphNode_t node : all) {
      cudaGraphNodeType type;
      CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeKernel) ++kernel_nodes_;
    }
    nodes_ = static_cast<int>(nodes);
  }
  ~Graph() {
    if (exec_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) TANDEM_CUDA_LOG_IF_ERROR(cudaGraphDestroy(graph_));
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void Launch(cudaStream_t stream) { CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }
  int nodes() const { return nodes_; }
  int kernel_nodes() const { return kernel_nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int nodes_ = 0;
  int kernel_nodes_ = 0;
};

// One graph per input set, captured from `trainer` (already warmed up),
// for steps first, first + 1, ...: graph s is the step on input set s.
// `losses[s]` keeps graph s's loss output alive; each replay rewrites it.
// Replays continue from step `first` in order (graph k % sets for step k).
struct StepGraphs {
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<Tensor> losses;
};

StepGraphs CaptureSteps(Trainer& trainer, const Batches& data, int first) {
  StepGraphs g;
  const size_t sets = data.x.size();
  g.graphs.resize(sets);
  g.losses.resize(sets);
  // Graph s's loss stays alive while graph s + 1 is captured, so the
  // captures need up to one block per graph more of a class than the eager
  // steps did: ReserveSpares caches them before capture.
  auto* caching = dynamic_cast<cuda::CachingAllocator*>(&GetBackend(kDevice).allocator());
  TANDEM_CHECK(caching != nullptr) << "cuda:0's allocator is not the caching allocator";
  caching->ReserveSpares(static_cast<int>(data.x.size()) + 1);
  const int64_t mallocs = CudaMallocCount();
  for (size_t j = 0; j < sets; ++j) {
    const size_t s = (static_cast<size_t>(first) + j) % sets;
    Tensor loss;
    g.graphs[s] = std::make_unique<Graph>(
        Stream(), [&] { loss = trainer.Step(data.x[s], data.y[s]); });
    g.losses[s] = loss;
  }
  TANDEM_CHECK(CudaMallocCount() == mallocs)
      << "capturing a step called cudaMalloc; run more warm-up steps";
  return g;
}

// ---------------------------------------------------------------------------
// One model at one batch size.

// Kernel launches plus cuBLAS calls one eager step issues (layers/*.cc,
// core/cuda/kernels_*.cu): ZeroGrad fills each parameter's gradient; each
// Linear runs one GEMM forward (bias and ReLU in its epilogue), and
// [activation backward,] dW GEMM, bias ColumnSums, dx GEMM backward; MSE is a
// partial-sum kernel plus a final sum; SGD is one kernel per parameter.
// Only --grads=accumulate zeroes, and fused_sgd has no SGD pass (the dW GEMM
// and ColumnSums update the parameters).
int TandemCallsPerStep(const ModelSpec& spec, const std::string& grads) {
  const int layers = static_cast<int>(spec.sizes.size()) - 1;
  const int params = 2 * layers;
  const int hidden = layers - 1;  // layers with a fused ReLU
  const int zero = grads == "accumulate" ? params : 0;
  const int sgd = grads == "fused_sgd" ? 0 : params;
  // Backward: per layer dW GEMM, ColumnSums and dx GEMM (none for the
  // first layer), plus ReLU-backward on the hidden layers.
  return zero + layers + 2 + (3 * layers - 1 + hidden) + sgd;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// K eager steps vs 3 eager steps + (K - 3) graph replays, from the same
// seed on the same data: the parameters must agree. Returns the check row.
bench::Row CheckGraph(const ModelSpec& spec, int64_t batch, const Batches& data,
                      const Options& o) {
  const int warm = 3;
  const int k_steps = std::max(o.check_steps, warm + 2 * o.sets);
  std::vector<float> eager, graphed;
  float eager_loss = 0, graph_loss = 0;
  {
    Trainer t(spec, o);
    Tensor loss;
    for (int k = 0; k < k_steps; ++k) loss = t.Step(data.x[k % o.sets], data.y[k % o.sets]);
    eager_loss = loss.Item();
    eager = t.FlatParameters();
  }
  {
    Trainer t(spec, o);
    for (int k = 0; k < warm; ++k) t.Step(data.x[k % o.sets], data.y[k % o.sets]);
    StepGraphs g = CaptureSteps(t, data, warm);
    int last = 0;
    for (int k = warm; k < k_steps; ++k) {
      last = k % o.sets;
      g.graphs[last]->Launch(Stream());
    }
    graph_loss = g.losses[last].Item();
    graphed = t.FlatParameters();
  }
  TANDEM_CHECK(eager.size() == graphed.size()) << "parameter counts differ";
  std::vector<float> diff(eager.size());
  double max_abs = 0;
  bool bitwise = true;
  for (size_t i = 0; i < eager.size(); ++i) {
    diff[i] = graphed[i] - eager[i];
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(diff[i])));
    bitwise = bitwise && graphed[i] == eager[i];
  }
  const double rel = Norm(diff) / Norm(eager);
  const bool pass = std::isfinite(rel) && rel <= 1e-5 && std::isfinite(graph_loss);
  bench::Row row("check");
  row.Add("bench", "gpu_step").Add("model", spec.name).Add("batch", batch)
      .Add("what", "graph_vs_eager_parameters").Add("steps", k_steps)
      .Add("rel_l2", bench::Fixed(rel, 9)).Add("max_abs", bench::Fixed(max_abs, 9))
      .Add("bitwise", bitwise ? "yes" : "no")
      .Add("loss_eager", eager_loss, 6).Add("loss_graph", graph_loss, 6)
      .Add("status", pass ? "PASS" : "FAIL");
  return row;
}

// Prints the model's rows (the eager and graph ones kept for the table);
// a failed graph check clears checks_ok.
void RunModel(const ModelSpec& spec, int64_t batch, const Options& o, const References& refs,
              GemmTimer& timer, bench::ResultPrinter& results, bool& checks_ok) {
  // The peak of this configuration's tensors: its data, model and steps.
  GetBackend(kDevice).allocator().ResetPeak();
  const Batches data = MakeBatches(spec, batch, o.sets, o.seed);
  Trainer trainer(spec, o);
  const int64_t params = ParameterCount(trainer.model());
  const double flops = 6.0 * static_cast<double>(params) * batch;

  int k = 0;
  Tensor loss;
  auto eager_step = [&](int i) { loss = trainer.Step(data.x[i % o.sets], data.y[i % o.sets]); };
  for (int i = 0; i < o.warmup; ++i) eager_step(k++);
  const Timing probe = TimeSteps(3, 1, k, eager_step);
  const int steps = StepsFor(o, probe.gpu_ms);

  GemmSum gemms;
  if (o.gemm) {
    gemms = ModelGemms(spec, batch, o.precision, timer, results);
    // The GEMM-alone operands are not the step's: the peak starts again
    // from what the model and data hold, and the timed steps reach theirs.
    GetBackend(kDevice).allocator().ResetPeak();
  }

  auto report = [&](const std::string& mode, const Timing& t, int64_t mallocs, int nodes,
                    int kernels, float loss_value) {
    bench::Row row;
    row.Add("bench", "gpu_step").Add("impl", "tandem").Add("model", spec.name)
        .Add("batch", batch).Add("mode", mode).Add("grads", o.grads).Add("param_lane", o.param_lane)
        .Add("params", params)
        .Add("precision", PrecisionName(o.precision)).Add("steps", t.steps)
        .Add("repeats", o.repeats).Add("cool_ms", o.cool_ms, 0)
        .Add("step_ms", t.gpu_ms, 4)
        .Add("samples_per_s", batch / (t.gpu_ms * 1e-3), 0)
        .Add("tflops", Tflops(flops, t.gpu_ms), 2);
    AddRateShares(row, Tflops(flops, t.gpu_ms), o.precision, refs);
    const double peak = static_cast<double>(
        GetBackend(kDevice).allocator().stats().peak_bytes_in_use);
    row.Add("peak_mb", peak / (1 << 20), 1);
    if (o.gemm) {
      row.Add("gemm_sum_ms", gemms.all_ms, 4)
          .Add("gemm_share", gemms.all_ms / t.gpu_ms, 3);
    }
    row.Add("host_ms", t.host_ms, 4).Add("calls_per_step", TandemCallsPerStep(spec, o.grads));
    if (nodes >= 0) row.Add("graph_nodes", nodes).Add("graph_kernels", kernels);
    row.Add("cuda_mallocs_timed", mallocs).Add("loss", loss_value, 5);
    TANDEM_CHECK(std::isfinite(loss_value))
        << spec.name << " batch " << batch << " (" << mode << "): loss is not finite";
    results.PrintAndKeep(row);
  };

  int64_t mallocs = CudaMallocCount();
  Cool(o);
  const Timing eager = TimeSteps(steps, o.repeats, k, eager_step);
  report("eager", eager, CudaMallocCount() - mallocs, -1, -1, loss.Item());

  if (o.graph) {
    // A graph failure is reported, and fails the run at the end, but does
    // not cost the remaining models their eager numbers.
    try {
    bench::Row check = CheckGraph(spec, batch, data, o);
    results.Print(check);
    checks_ok = checks_ok && check.Get("status") == "PASS";
    StepGraphs g = CaptureSteps(trainer, data, k);
    auto replay = [&](int i) { g.graphs[i % o.sets]->Launch(Stream()); };
    TimeSteps(std::max(3, 2 * o.sets), 1, k, replay);  // first launches upload each graph
    mallocs = CudaMallocCount();
    Cool(o);
    const Timing graphed = TimeSteps(steps, o.repeats, k, replay);
    const int64_t graph_mallocs = CudaMallocCount() - mallocs;
    report("graph", graphed, graph_mallocs, g.graphs[0]->nodes(), g.graphs[0]->kernel_nodes(),
           g.losses[(k - 1) % o.sets].Item());
    } catch (const std::exception& e) {
      results.PrintLine("graph model=" + spec.name + " batch=" + std::to_string(batch) +
                        " status=FAIL reason=\"" + e.what() + "\"");
      checks_ok = false;
    }
  }
}

// The flags' checks, in this order (the last: a GPU is visible).
void CheckFlags(const std::string& model, const Options& o) {
  TANDEM_CHECK(model == "large" || model == "small" || model == "all")
      << "--model must be large, small or all, got '" << model << "'";
  TANDEM_CHECK(o.warmup >= 3) << "--warmup must be at least 3 (the allocator's "
                                 "cache must be warm before a graph capture), got "
                              << o.warmup;
  TANDEM_CHECK(o.repeats >= 1 && o.sets >= 1 && o.steps >= 0)
      << "--repeats and --sets must be at least 1 and --steps not negative";
  TANDEM_CHECK(CudaDeviceCount() > 0) << "gpu_step_bench needs a GPU: "
                                      << CudaUnavailableReason();
}

}  // namespace
}  // namespace bench_step
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::bench_step;
  Options o;
  std::string model = "all", batches;
  CLI::App app{"Tandem: single-GPU MLP training step vs the cuBLAS SGEMM rate"};
  app.option_defaults()->always_capture_default();
  app.add_option("--model", model, "large, small or all");
  app.add_option("--batch", batches,
                 "batch sizes, comma-separated (default: large 512,4096; small 256)");
  app.add_option("--steps", o.steps, "timed steps per run (0: about --target_ms per run)");
  app.add_option("--target_ms", o.target_ms, "run length when --steps=0");
  app.add_option("--warmup", o.warmup, "untimed steps first (at least 3)");
  app.add_option("--repeats", o.repeats, "timed runs; the median is reported");
  app.add_option("--sets", o.sets, "distinct input batches, used in turn");
  app.add_flag("--graph", o.graph, "also time CUDA-graph replays of the step (checked first)");
  app.add_option("--check_steps", o.check_steps, "steps of the graph-vs-eager check");
  std::string precision = "fp32";
  app.add_option("--precision", precision,
                 "fp32, tf32 (TF32 GEMMs) or bf16 (bfloat16 activations and GEMMs, float32 "
                 "master weights)");
  bool tf32 = false;
  app.add_flag("--tf32", tf32, "the same as --precision=tf32");
  app.add_flag("!--no_gemm", o.gemm, "skip the GEMM-alone measurements");
  app.add_option("--sgemm_size", o.sgemm_size, "size of the square reference SGEMM");
  app.add_option("--gemm_sustain_ms", o.sustain_ms,
                 "also measure the square GEMM rate of --precision after this many ms of it "
                 "back to back (0: not)");
  app.add_option("--cool_ms", o.cool_ms,
                 "idle the GPU this long before each burst GEMM rate and before the timed "
                 "steps (0: not)");
  app.add_option("--lr", o.lr, "SGD learning rate");
  app.add_option("--grads", o.grads,
                 "accumulate (ZeroGrad + Step), overwrite (no ZeroGrad) or fused_sgd "
                 "(SGD inside Backward)");
  app.add_option("--param_lane", o.param_lane,
                 "side (weight gradients beside the input-gradient GEMMs) or main (one "
                 "lane, less memory)");
  app.add_option("--seed", o.seed, "seed for weights and data");
  CLI11_PARSE(app, argc, argv);

  return bench::RunMain([&] {
    CheckFlags(model, o);
    cuda::SetCurrentDevice(0);
    o.precision = tf32 ? Precision::kTf32 : ParsePrecision(precision);
    std::cout << "device: " << GetBackend(kDevice).Describe() << "\n"
              << "precision: " << PrecisionName(o.precision) << std::endl;

    std::vector<ModelSpec> specs;
    if (model != "small") specs.push_back(LargeModel());
    if (model != "large") specs.push_back(SmallModel());

    bench::ResultPrinter results;
    GemmTimer timer(o);
    const References refs = o.gemm ? MeasureReferences(o, timer, results) : References{};

    bool checks_ok = true;
    for (const ModelSpec& spec : specs) {
      const std::vector<int64_t> list =
          batches.empty() ? spec.default_batches : bench::ParseIntList(batches, "--batch");
      for (int64_t batch : list) {
        RunModel(spec, batch, o, refs, timer, results, checks_ok);
      }
    }
    results.PrintTable({"model", "batch", "precision", "mode", "step_ms", "samples_per_s",
                        "tflops", "pct_gemm", "gemm_sum_ms", "gemm_share", "host_ms",
                        "peak_mb"});
    if (o.gemm) PrintReferenceSummary(o, refs);
    if (!checks_ok) {
      std::cerr << "error: a graph-vs-eager check failed (see the check lines)" << std::endl;
      return 2;
    }
    return 0;
  });
}
