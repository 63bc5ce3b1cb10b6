// GPU data-parallel training step: Tandem's reducer over NCCL on N GPUs, in
// threads mode (one process) or MPI mode (one rank per GPU).
//
//   gpu_dp_bench --model=large --batch=512 --workers=2            # threads
//   mpirun -np 2 gpu_dp_bench --model=large --batch=512 --mode=mpi
//   gpu_dp_bench --model=large --workers=2 --allreduce_only       # bandwidth
//
// Models and loss match bench/torch_ddp.py: MLP with ReLU, MSE against
// N(0,1) targets, plain SGD (lr 1e-3), fp32 without TF32; --batch is per GPU.
// Timing: CUDA events on rank 0's compute stream around --steps steps after
// --warmup, median of --repeats runs. "comm_wait" is the time the GPU's
// compute stream spent waiting for NCCL at the end of backward: from the
// event after the first layer's backward kernels to the event after the
// reducer's JoinQueued (both on the compute stream), i.e. what overlap did
// not hide.
//
// --allreduce_only compares the reducer's bucketed all-reduce of the whole
// gradient (no compute) with one raw all-reduce of the same bytes.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "bench/bench_util.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cuda/cuda_backend.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
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
  // gradients (GradTarget::kOverwrite), no ZeroGrad pass; fused_sgd (one
  // GPU only): Sgd::FuseIntoBackward, the single-GPU bench's default.
  std::string grads = "overwrite";
  // per_bucket: Reducer::set_optimizer (each bucket updated once reduced);
  // step: the optimizer's Step after Backward.
  std::string update = "per_bucket";
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

// One more step with device timestamps, in ms from its start: where forward
// and backward end on the compute stream, when the compute stream has joined
// the all-reduces, when the optimizer is done, and each bucket's all-reduce
// on its communication stream. The markers at backward's end and after the
// join also join the side lane, as the step does there anyway.
template <typename Step>
void Trace(Worker& w, Reducer& reducer, Backend& backend, Step& step,
           const std::unique_ptr<TimeMarker>& backward_end,
           const std::unique_ptr<TimeMarker>& joined, std::mutex& print) {
  reducer.set_record_device_times(true);
  w.comm.Barrier();
  backend.Synchronize();
  auto start = backend.Mark();
  step(true);
  auto end = backend.Mark();
  backend.Synchronize();
  reducer.set_record_device_times(false);
  if (!w.is_root()) return;
  auto ms = [&](const TimeMarker& m) { return m.MicrosSince(*start) / 1000.0; };
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << "dp_trace gpus=" << w.size
       << " backward_end=" << ms(*backward_end) << " joined=" << ms(*joined)
       << " step_end=" << ms(*end) << " buckets=";
  const ReducerTimeline& t = reducer.last_timeline();
  for (size_t b = 0; b < t.device_bucket_spans.size(); ++b) {
    const Communicator::QueuedSpan& span = t.device_bucket_spans[b];
    line << (b ? "," : "") << ms(*span.start) << "-" << ms(*span.end);
  }
  std::lock_guard<std::mutex> lock(print);
  std::cout << line.str() << std::endl;
}

// Whether the reducer's buckets are NCCL symmetric memory (Note [Symmetric
// memory] in parallel/nccl_communicator.cc).
bool SymmetricMemory(Worker& w) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(&w.gradient_comm());
  return nccl != nullptr && nccl->symmetric_memory();
}

void RunTraining(const Options& o, Worker& w, std::mutex& print) {
  cuda::SetAllowTf32(false);
  const std::vector<int64_t> sizes = Sizes(o.model);
  Rng rng(42);
  MlpOptions mlp;
  mlp.device = w.device;
  auto model = Mlp(sizes, Activation::kRelu, rng, mlp);
  ReducerOptions ro;
  ro.bucket_bytes = static_cast<int64_t>(o.bucket_mb * (1 << 20));
  ro.overlap = o.overlap;
  ro.gemm_reserve = o.gemm_reserve;
  ro.gradients_first_layers = o.gradients_first_layers;
  Reducer reducer(*model, w.gradient_lanes(), ro);
  SgdParams sgd;
  sgd.lr = 1e-3f;
  Sgd optimizer(model->Parameters(), sgd);
  const bool overwrite = o.grads == "overwrite";
  const bool fused = o.grads == "fused_sgd";
  TANDEM_CHECK(overwrite || fused || o.grads == "accumulate")
      << "--grads must be accumulate, overwrite or fused_sgd, got '" << o.grads << "'";
  if (overwrite) {
    TANDEM_CHECK(model->SetGradTarget(GradTarget::Overwrite())) << "cannot overwrite gradients";
  }
  // One GPU only: the reducer refuses a model that applies SGD in Backward
  // when there is more than one worker.
  if (fused) TANDEM_CHECK(optimizer.FuseIntoBackward(*model)) << "cannot fuse SGD";
  TANDEM_CHECK(o.update == "per_bucket" || o.update == "step")
      << "--update must be per_bucket or step, got '" << o.update << "'";
  if (o.update == "per_bucket" && !fused) reducer.set_optimizer(&optimizer);
  MseLoss loss;
  Rng data(7 + w.rank);
  Tensor x = Random({o.batch, sizes.front()}, data, w.device);
  Tensor y = Random({o.batch, sizes.back()}, data, w.device);
  Backend& backend = GetBackend(w.device);

  std::unique_ptr<TimeMarker> backward_end, joined;
  auto step = [&](bool measure_wait) {
    if (!overwrite) optimizer.ZeroGrad();  // does nothing when fused
    loss.Forward(model->Forward(x), y, o.batch * w.size);
    if (measure_wait) {
      reducer.set_layer_done_hook([&](size_t layer) {
        if (layer == 0) backward_end = backend.Mark();
      });
    }
    reducer.Backward(loss.Backward());
    if (measure_wait) {
      joined = backend.Mark();
      reducer.set_layer_done_hook(nullptr);
    }
    optimizer.Step();
  };
  for (int i = 0; i < o.warmup; ++i) step(false);
  std::vector<double> step_ms, wait_ms;
  for (int r = 0; r < o.repeats; ++r) {
    w.comm.Barrier();
    backend.Synchronize();
    auto start = backend.Mark();
    for (int i = 0; i < o.steps; ++i) step(false);
    auto end = backend.Mark();
    step_ms.push_back(end->MicrosSince(*start) / 1000.0 / o.steps);
    // One extra step measures the compute stream's wait for NCCL.
    step(true);
    wait_ms.push_back(joined->MicrosSince(*backward_end) / 1000.0);
  }
  const double ms = bench::Median(step_ms);
  const int64_t params = ParameterCount(*model);
  if (w.is_root()) {
    std::lock_guard<std::mutex> lock(print);
    bench::Row row("dp_step");
    row.Add("model", o.model).Add("batch_per_gpu", o.batch).Add("gpus", w.size)
        .Add("overlap", o.overlap ? "on" : "off").Add("grads", o.grads)
        .Add("update", fused ? "fused" : o.update)
        .Add("bucket_mb", o.bucket_mb, 1).Add("gemm_reserve", o.gemm_reserve)
        .Add("gradients_first", o.gradients_first_layers)
        .Add("symmetric", SymmetricMemory(w) ? "on" : "off")
        .Add("buckets", reducer.num_buckets()).Add("lanes", reducer.num_lanes())
        .Add("step_ms", ms, 3)
        .Add("samples_per_s", o.batch * w.size / (ms / 1000.0), 0)
        .Add("tflops", 6.0 * params * o.batch * w.size / (ms / 1000.0) / 1e12, 1)
        .Add("comm_wait_ms", bench::Median(wait_ms), 3)
        .Add("params", params);
    std::cout << row.KeyValues() << std::endl;
  }
  if (o.trace) Trace(w, reducer, backend, step, backward_end, joined, print);
}

// Bucketed all-reduce of the whole gradient vs one raw all-reduce.
void RunAllReduce(const Options& o, Worker& w, std::mutex& print) {
  const std::vector<int64_t> sizes = Sizes(o.model);
  Rng rng(42);
  MlpOptions mlp;
  mlp.device = w.device;
  auto model = Mlp(sizes, Activation::kRelu, rng, mlp);
  ReducerOptions ro;
  ro.bucket_bytes = static_cast<int64_t>(o.bucket_mb * (1 << 20));
  Reducer reducer(*model, w.gradient_lanes(), ro);
  Communicator& comm = w.gradient_comm();
  const std::vector<Communicator*> lanes = w.gradient_lanes();
  const int64_t n = ParameterCount(*model);
  // The kind of memory the reducer's buckets are in (NCCL symmetric memory
  // unless TANDEM_NCCL_SYMMETRIC=0), for both timings; one raw all-reduce of
  // ordinary device memory as well, for reference.
  Tensor flat = comm.NewReduceBuffer(n, w.device);
  Tensor plain = Tensor::Zeros({n}, w.device);
  Backend& backend = GetBackend(w.device);
  auto time_us = [&](const std::function<void()>& fn) {
    std::vector<double> runs;
    for (int r = 0; r < o.repeats + 2; ++r) {
      w.comm.Barrier();
      backend.Synchronize();
      auto start = backend.Mark();
      for (int i = 0; i < o.steps; ++i) fn();
      for (Communicator* lane : lanes) lane->JoinQueued();
      auto end = backend.Mark();
      if (r >= 2) runs.push_back(end->MicrosSince(*start) / o.steps);
    }
    return bench::Median(runs);
  };
  const double raw_us = time_us([&] { comm.QueueAllReduce(flat.data(), n, ReduceOp::kSum); });
  const double plain_us = time_us([&] { comm.QueueAllReduce(plain.data(), n, ReduceOp::kSum); });
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
      lanes[b % lanes.size()]->QueueAllReduce(flat.data() + offset, elems, ReduceOp::kSum);
      offset += elems;
    }
  });
  if (w.is_root()) {
    std::lock_guard<std::mutex> lock(print);
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
    std::cout << row.KeyValues() << std::endl;
  }
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  Options o;
  LaunchOptions launch;
  launch.device = "cuda";
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
  app.add_option("--update", o.update, "per_bucket (Reducer::set_optimizer) or step");
  app.add_option("--grads", o.grads, "overwrite (no ZeroGrad), accumulate (ZeroGrad + add) or fused_sgd (1 GPU)");
  app.add_option("--mode", launch.mode, "threads or mpi");
  app.add_option("--gradient_lanes", launch.gradient_lanes,
                 "NCCL communicators the buckets are spread over");
  app.add_option("--workers", workers, "GPUs in threads mode");
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.count("--workers") > 0) launch.workers = workers;
    std::mutex print;
    Launch(launch, [&](Worker& w) {
      if (o.allreduce_only) RunAllReduce(o, w, print);
      else RunTraining(o, w, print);
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
