// GPU data-parallel training step: Tandem's reducer over NCCL on N GPUs, in
// threads mode (one process) or MPI mode (one rank per GPU).
//
//   gpu_dp_bench --model=large --batch=512 --workers=2            # threads
//   mpirun -np 2 gpu_dp_bench --model=large --batch=512 --mode=mpi
//   gpu_dp_bench --model=large --workers=2 --allreduce_only       # bandwidth
//
// Models and loss match bench/torch_ddp.py: MLP with ReLU, MSE against
// N(0,1) targets, plain SGD (lr 1e-3); --batch is per GPU. --precision: fp32
// without TF32 (the default), tf32 (TF32 GEMMs) or bf16 (bfloat16
// activations and working copies, float32 masters: layers/precision.h);
// --bf16_allreduce all-reduces the gradients in bfloat16
// (BFloat16CompressionHook), as the trainer's flag of that name does.
// Timing: timing events on rank 0's main lane around --steps steps after
// --warmup, median of --repeats runs. "comm_wait" is the time the GPU's main
// lane spent waiting for NCCL at the end of backward: from an event after
// the first layer's backward kernels (parameter lane joined) to an event
// after the reducer's Backward has made the main lane wait for every
// bucket's reduction (and, with --update=per_bucket, its update), i.e. what
// overlap did not hide.
//
// --allreduce_only compares the reducer's bucketed all-reduce of the whole
// gradient (no compute) with one raw all-reduce of the same bytes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <iomanip>
#include <memory>
#include <sstream>
#include <vector>

#include "bench/bench_util.h"
#include "bench/comm_timing.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cuda/cuda_backend.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/precision.h"
#include "parallel/comm_hook.h"
#include "parallel/launcher.h"
#include "parallel/nccl_communicator.h"
#include "parallel/reducer.h"

namespace tandem {
namespace {

struct Options {
  std::string model = "large";
  int64_t batch = 512;
  int steps = 30;
  int warmup = 5;
  int repeats = 5;
  double bucket_mb = 25.0;
  bool overlap = true;
  int gemm_reserve = ReducerOptions().gemm_reserve;
  int gradients_first_layers = ReducerOptions().gradients_first_layers;
  bool trace = false;
  bool allreduce_only = false;
  // accumulate: ZeroGrad, Backward adds; overwrite: Backward writes the
  // gradients (GradMode::kOverwrite), no ZeroGrad pass; fused_sgd (one GPU
  // only): SGD inside Backward (Sgd::in_backward), the single-GPU bench's
  // default.
  std::string grads = "overwrite";
  // per_bucket: an OptimizerUpdateHook updates each bucket once reduced;
  // step: the optimizer's Step after Backward.
  std::string update = "per_bucket";
  Precision precision = Precision::kFp32;
  bool bf16_allreduce = false;
};

std::vector<int64_t> Sizes(const std::string& model) {
  if (model == "large") return {1024, 4096, 4096, 4096, 4096, 1024};
  TANDEM_CHECK(model == "small") << "--model must be large or small, got " << model;
  return {784, 1024, 1024, 10};
}

Tensor Random(const Shape& shape, Rng& rng, Device device) {
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = rng.Normal();
  return Tensor::FromVector(v, shape, device);
}

// The benchmark's model on the worker's GPU and its reducer over the
// worker's gradient lanes (which broadcasts rank 0's parameters).
struct Replica {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Reducer> reducer;
};

Replica MakeReplica(const Options& o, Worker& w, ReducerOptions ro) {
  Rng rng(42);
  MlpOptions mlp;
  mlp.device = w.device;
  mlp.precision = o.precision;
  Replica r;
  r.model = Mlp(Sizes(o.model), Activation::kRelu, rng, mlp);
  ro.bucket_bytes = static_cast<int64_t>(o.bucket_mb * (1 << 20));
  r.reducer = std::make_unique<Reducer>(*r.model, w.gradient_comms(), ro);
  return r;
}

// One more step with device timestamps, in ms from its start: where forward
// and backward end on the main lane, when the main lane has waited for the
// reductions, when the optimizer is done, and each bucket's reduction on its
// communicator's lane.
template <typename Step>
void Trace(Worker& w, Reducer& reducer, const Lane& main, Step& step,
           const std::unique_ptr<LaneEvent>& backward_end,
           const std::unique_ptr<LaneEvent>& joined, bench::ResultPrinter& results) {
  Backend& backend = main.backend();
  w.comm.Barrier()->Wait();
  backend.Synchronize();
  const std::unique_ptr<LaneEvent> start = bench::TimingEvent(main);
  step(true, CollectiveTiming::kTimed);
  const std::unique_ptr<LaneEvent> end = bench::TimingEvent(main);
  backend.Synchronize();
  if (!w.is_root()) return;
  auto ms = [&](const LaneEvent& e) { return e.ElapsedMsSince(*start); };
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "dp_trace gpus=" << w.size
       << " backward_end=" << ms(*backward_end) << " joined=" << ms(*joined)
       << " step_end=" << ms(*end) << " buckets=";
  // One rank reduces nothing: its buckets' work carries no events.
  const char* separator = "";
  for (const std::shared_ptr<Work>& work : reducer.last_timeline().bucket_work) {
    if (work == nullptr || work->started() == nullptr || work->finished() == nullptr) continue;
    line << separator << ms(*work->started()) << "-" << ms(*work->finished());
    separator = ",";
  }
  results.PrintLine(line.str());
}

// Whether the reducer's buckets are NCCL symmetric memory (Note [Symmetric
// memory] in parallel/nccl_reduce_buffer.cc).
bool SymmetricMemory(Worker& w) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(&w.gradient_comm());
  return nccl != nullptr && nccl->symmetric_memory();
}

// How the step handles gradients and the update (--grads, --update).
struct StepPlan {
  BackwardArgs args;
  bool zero_grad = false;   // ZeroGrad before each step
  bool per_bucket = false;  // an OptimizerUpdateHook; no Step call
};

StepPlan PlanStep(const Options& o, Worker& w, Sgd& optimizer) {
  const bool overwrite = o.grads == "overwrite";
  const bool fused = o.grads == "fused_sgd";
  TANDEM_CHECK(overwrite || fused || o.grads == "accumulate")
      << "--grads must be accumulate, overwrite or fused_sgd, got '" << o.grads << "'";
  TANDEM_CHECK(o.update == "per_bucket" || o.update == "step")
      << "--update must be per_bucket or step, got '" << o.update << "'";
  StepPlan plan;
  plan.args = BackwardArgs::For(w.device);
  plan.args.input_grad = false;  // the model's input is data
  if (overwrite || fused) plan.args.grad_mode = GradMode::kOverwrite;
  // One GPU only: the reducer refuses an update inside Backward when there
  // is more than one worker.
  if (fused) {
    plan.args.update = optimizer.in_backward();
    TANDEM_CHECK(plan.args.update != nullptr) << "cannot fuse SGD";
  }
  plan.zero_grad = !overwrite && !fused;
  plan.per_bucket = o.update == "per_bucket" && !fused;
  return plan;
}

void RunTraining(const Options& o, Worker& w, bench::ResultPrinter& results) {
  cuda::SetAllowTf32(false);
  ReducerOptions ro;
  ro.overlap = o.overlap;
  ro.gemm_reserve = o.gemm_reserve;
  ro.gradients_first_layers = o.gradients_first_layers;
  Replica replica = MakeReplica(o, w, ro);
  Sequential& model = *replica.model;
  Reducer& reducer = *replica.reducer;
  SgdParams sgd;
  sgd.lr = 1e-3f;
  Sgd optimizer(model.Parameters(), sgd);
  const StepPlan plan = PlanStep(o, w, optimizer);
  std::unique_ptr<CommHook> reduce;
  if (o.bf16_allreduce) reduce = std::make_unique<BFloat16CompressionHook>();
  if (plan.per_bucket) {
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(optimizer, std::move(reduce)));
  } else if (reduce) {
    reducer.RegisterCommHook(std::move(reduce));
  }
  MseLoss loss;
  Rng data(7 + w.rank);
  const std::vector<int64_t> sizes = Sizes(o.model);
  Tensor x = Random({o.batch, sizes.front()}, data, w.device);
  Tensor y = Random({o.batch, sizes.back()}, data, w.device);
  Backend& backend = GetBackend(w.device);
  const Lane main = backend.main_lane();

  std::unique_ptr<LaneEvent> backward_end, joined;
  LayerHooks at_first_layer;  // marks the end of backward's compute
  at_first_layer.on_backward_done = [&](Layer& layer) {
    if (&layer != &model.layer(0)) return;
    // Backward joins the parameter lane into the main lane right after
    // this anyway (Sequential::BackwardWith).
    ops::WaitFor(main, plan.args.param_lane);
    backward_end = bench::TimingEvent(main);
  };
  // measure_wait: marks the end of backward's compute and of the main
  // lane's wait; timing: timing events on the reductions too (Trace).
  auto step = [&](bool measure_wait,
                  CollectiveTiming timing = CollectiveTiming::kUntimed) {
    if (plan.zero_grad) optimizer.ZeroGrad();
    loss.Forward(model.Forward(x), y, o.batch * w.size);
    BackwardArgs args = plan.args;
    if (measure_wait) args.hooks = &at_first_layer;
    reducer.BackwardWith(loss.Backward(), args, GradientSync::kReduce, timing);
    if (measure_wait) joined = bench::TimingEvent(main);
    if (!plan.per_bucket) optimizer.Step();
  };
  for (int i = 0; i < o.warmup; ++i) step(false);
  std::vector<double> step_ms, wait_ms;
  for (int r = 0; r < o.repeats; ++r) {
    w.comm.Barrier()->Wait();
    backend.Synchronize();
    const std::unique_ptr<LaneEvent> start = bench::TimingEvent(main);
    for (int i = 0; i < o.steps; ++i) step(false);
    const std::unique_ptr<LaneEvent> end = bench::TimingEvent(main);
    step_ms.push_back(end->ElapsedMsSince(*start) / o.steps);
    // One extra step measures the main lane's wait for NCCL.
    step(true);
    wait_ms.push_back(joined->ElapsedMsSince(*backward_end));
  }
  const double ms = bench::Median(step_ms);
  const int64_t params = ParameterCount(model);
  if (w.is_root()) {
    bench::Row row("dp_step");
    row.Add("model", o.model).Add("batch_per_gpu", o.batch).Add("gpus", w.size)
        .Add("precision", PrecisionName(o.precision))
        .Add("bf16_allreduce", o.bf16_allreduce ? "on" : "off")
        .Add("overlap", o.overlap ? "on" : "off").Add("grads", o.grads)
        .Add("update", plan.args.update != nullptr ? "fused" : o.update)
        .Add("bucket_mb", o.bucket_mb, 1).Add("gemm_reserve", o.gemm_reserve)
        .Add("gradients_first", o.gradients_first_layers)
        .Add("symmetric", SymmetricMemory(w) ? "on" : "off")
        .Add("buckets", reducer.num_buckets()).Add("lanes", reducer.num_comms())
        .Add("step_ms", ms, 3)
        .Add("samples_per_s", o.batch * w.size / (ms / 1000.0), 0)
        .Add("tflops", 6.0 * params * o.batch * w.size / (ms / 1000.0) / 1e12, 1)
        .Add("comm_wait_ms", bench::Median(wait_ms), 3)
        .Add("params", params);
    results.Print(row);
  }
  if (o.trace) Trace(w, reducer, main, step, backward_end, joined, results);
}

// Bucketed all-reduce of the whole gradient vs one raw all-reduce.
void RunAllReduce(const Options& o, Worker& w, bench::ResultPrinter& results) {
  Replica replica = MakeReplica(o, w, ReducerOptions());
  Reducer& reducer = *replica.reducer;
  Communicator& comm = w.gradient_comm();  // lanes[0]
  const std::vector<Communicator*> lanes = w.gradient_comms();
  const int64_t n = ParameterCount(*replica.model);
  // The kind of memory the reducer's buckets are in (NCCL symmetric memory
  // unless TANDEM_NCCL_SYMMETRIC=0), for both timings; one raw all-reduce of
  // ordinary device memory as well, for reference.
  Tensor flat = comm.NewReduceBuffer(n, w.device);
  Tensor plain = Tensor::Zeros({n}, w.device);
  Backend& backend = GetBackend(w.device);
  const Lane main = backend.main_lane();
  // The last collective `fn` queued on each lane: one communicator's
  // collectives run in order, so the main lane waiting for it waits for all.
  std::vector<std::shared_ptr<Work>> last(lanes.size());
  auto time_us = [&](const std::function<void()>& fn) {
    std::vector<double> runs;
    for (int r = 0; r < o.repeats + 2; ++r) {
      w.comm.Barrier()->Wait();
      backend.Synchronize();
      const std::unique_ptr<LaneEvent> start = bench::TimingEvent(main);
      for (int i = 0; i < o.steps; ++i) fn();
      for (std::shared_ptr<Work>& work : last) {
        if (work != nullptr) work->WaitOn(main);
        work.reset();
      }
      const std::unique_ptr<LaneEvent> end = bench::TimingEvent(main);
      if (r >= 2) runs.push_back(1e3 * end->ElapsedMsSince(*start) / o.steps);
    }
    return bench::Median(runs);
  };
  const double raw_us = time_us([&] { last[0] = comm.AllReduce(flat.data(), n, ReduceOp::kSum); });
  const double plain_us =
      time_us([&] { last[0] = comm.AllReduce(plain.data(), n, ReduceOp::kSum); });
  // The reducer's buckets, in its launch order, each a separate all-reduce
  // on the lane the reducer gives it (as in a step), over chunks of one
  // buffer of the same total size. That buffer is registered with the first
  // lane only: with two lanes, lane 1's buckets run from memory its
  // communicator sees as ordinary (in a step each bucket is registered with
  // its own lane).
  const double bucket_us = time_us([&] {
    int64_t offset = 0;
    for (int b = 0; b < reducer.num_buckets(); ++b) {
      const int64_t elems = reducer.bucket_elements(b);
      const size_t lane = b % lanes.size();
      last[lane] = lanes[lane]->AllReduce(flat.data() + offset, elems, ReduceOp::kSum);
      offset += elems;
    }
  });
  if (w.is_root()) {
    const double bytes = 4.0 * n;
    std::string sizes;  // MiB per bucket, in launch order
    for (int b = 0; b < reducer.num_buckets(); ++b) {
      sizes += (b ? "/" : "") + bench::Fixed(reducer.bucket_elements(b) * 4.0 / (1 << 20), 3);
    }
    bench::Row row("allreduce");
    row.Add("model", o.model).Add("gpus", w.size).Add("bytes", static_cast<int64_t>(bytes))
        .Add("bucket_mb", o.bucket_mb, 1).Add("buckets", reducer.num_buckets())
        .Add("lanes", static_cast<int64_t>(lanes.size())).Add("bucket_sizes_mib", sizes)
        .Add("symmetric", SymmetricMemory(w) ? "on" : "off")
        .Add("raw_ms", raw_us / 1000, 3).Add("bucketed_ms", bucket_us / 1000, 3)
        .Add("raw_plain_ms", plain_us / 1000, 3)
        .Add("raw_busbw_gbs", bytes * 2 * (w.size - 1) / w.size / (raw_us * 1e3), 1)
        .Add("bucketed_busbw_gbs", bytes * 2 * (w.size - 1) / w.size / (bucket_us * 1e3), 1)
        .Add("bucketed_vs_raw", raw_us / bucket_us, 3)
        .Add("bucketed_vs_raw_plain", plain_us / bucket_us, 3);
    results.Print(row);
  }
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  Options o;
  LaunchOptions launch;
  launch.device = "cuda";
  std::string mode = "threads";
  int workers = 0;
  CLI::App app{"Tandem GPU data-parallel step benchmark"};
  app.add_option("--model", o.model, "large or small");
  app.add_option("--batch", o.batch, "batch per GPU");
  app.add_option("--steps", o.steps, "timed steps per run");
  app.add_option("--warmup", o.warmup, "untimed steps first");
  app.add_option("--repeats", o.repeats, "timed runs (median reported)");
  app.add_option("--bucket_mb", o.bucket_mb, "gradient bucket size, MiB");
  app.add_flag("!--no_overlap", o.overlap, "all-reduce after backward");
  app.add_option("--gemm_reserve", o.gemm_reserve,
                 "multiprocessors backward's GEMMs leave to NCCL (ReducerOptions)");
  app.add_option("--gradients_first_layers", o.gradients_first_layers,
                 "layers from the input that compute weight gradients first (ReducerOptions)");
  app.add_flag("--trace", o.trace, "then one step's device timeline (dp_trace)");
  app.add_flag("--allreduce_only", o.allreduce_only, "bucketed vs raw all-reduce");
  app.add_option("--update", o.update,
                 "per_bucket (the reducer's OptimizerUpdateHook) or step (Step after Backward)");
  app.add_option("--grads", o.grads, "overwrite (no ZeroGrad), accumulate (ZeroGrad + add) or fused_sgd (1 GPU)");
  app.add_option("--mode", mode, "threads or mpi");
  app.add_option("--gradient_comms", launch.gradient_comms,
                 "NCCL communicators the buckets are spread over");
  app.add_option("--workers", workers, "GPUs in threads mode");
  std::string precision = "fp32";
  app.add_option("--precision", precision, "fp32 (no TF32), tf32 or bf16");
  app.add_flag("--bf16_allreduce", o.bf16_allreduce, "all-reduce the gradients in bfloat16");
  CLI11_PARSE(app, argc, argv);
  return bench::RunMain([&] {
    o.precision = ParsePrecision(precision);
    launch.mode = ParseLaunchMode(mode);
    if (app.count("--workers") > 0) launch.workers = workers;
    bench::ResultPrinter results;
    Launch(launch, [&](Worker& w) {
      if (o.allreduce_only) RunAllReduce(o, w, results);
      else RunTraining(o, w, results);
    });
    return 0;
  });
}
