// The "which model when" table of docs/parallel.md: one parallel model on 2
// workers -- data-parallel threads, data-parallel MPI ranks, or a 2-stage
// pipeline -- on the CPU or on 2 GPUs, measured the same way in each.
//
//   model_table_bench --mode=threads [--device=cuda]
//   mpirun -np 2 model_table_bench --mode=mpi [--device=cuda]
//   model_table_bench --mode=pipeline [--device=cuda]
//   model_table_bench --mode=threads --fail_rank=1 --fail_step=3   # a failure
//
// bench/run_model_table.sh runs every cell (and the failures) and adds what
// only the outside can see: mpirun's start-up, exit codes, leftovers.
//
// The fixed model: an MLP with ReLU, MSE against N(0, 1) targets, SGD (lr
// 1e-3), fp32; on the CPU 784-1024-1024-10 at global batch 256 (dp_cpu_bench's
// MLP), on GPUs mlp-large 1024-4x4096-1024 at 512 per GPU, global 1024
// (gpu_dp_bench's). Data parallelism splits the global batch over the
// workers; the pipeline takes it whole in --micro_batches micro-batches, its
// stages balanced by parameter count (BalanceStages).
//
// Rank 0 prints one line, "result bench=model_table mode=... key=value ...":
//   startup_ms      main() to ready. Data parallel: Launch has made every
//                   communicator (and MPI_Init has run), on GPUs one NCCL
//                   all-reduce has run (NCCL connects on the first), and a
//                   host barrier has passed. Pipeline: a 2-stage Pipeline is
//                   built (stage threads started, devices initialised, peer
//                   access on). Rank 0's steady clock, taken first in main().
//   ready_epoch     that moment in seconds since the Unix epoch, so a script
//                   can add what came before main() (loading, mpirun).
//   first_step_ms   main() to the end of the first training step (model
//                   built, parameters broadcast, one step finished on the
//                   devices).
//   step_ms         one step of the fixed model: median of --repeats runs of
//                   --steps steps after --warmup; data parallel: timing
//                   events on the device's main lane (host clock / CUDA
//                   events), slowest rank;
//                   pipeline: host wall clock up to every stage's device
//                   being idle.
//   Data parallel, each a median over --comm_iters (--large_iters for the
//   large size), slowest rank (see bench/comm_timing.h):
//   barrier_us      one Barrier of the host communicator;
//   ar4_us, ar4k_us one all-reduce of 4 bytes and of 4 KiB on the gradient
//                   communicator (NCCL on GPUs);
//   ar_large_ms, ar_large_GBps  the same for --large_bytes; GB/s is bytes /
//                   time (algorithm bandwidth; with 2 ranks equal to NCCL's
//                   bus bandwidth).
//   Pipeline (which has no barrier and no all-reduce: its stages synchronise
//   by handing activations over):
//   handoff4_us, handoff4k_us, handoff_large_ms, handoff_large_GBps  one
//                   stage-to-stage hand-off of an activation of that size:
//                   half the difference between a step of two identity
//                   layers split into 2 stages and the same step on 1 stage
//                   (a step hands the activation forward and its gradient
//                   back; MSE is the only compute), medians over
//                   --comm_iters (--large_iters) steps. On the CPU the hand-off
//                   passes a tensor handle, so no bytes move.
//   handoff_large_1stage_ms  the 1-stage step of the large size: the scale
//                   against which the large hand-off's noise can be judged.
//
// Failures. With --fail_rank=R and --fail_step=N, worker R (pipeline: stage
// R) fails at the start of its N-th training step (1-based): --fail=throw
// throws, --fail=kill sends itself SIGKILL, --fail=hang stops for good
// (sleeps, never returns: a deadlocked or stuck worker). First it prints
// "fail_inject ... epoch=<seconds>" to stderr, so a script can time the
// failure to the job's end. The pipeline's failing stage is a layer that
// fails (PassLayer), placed alone in stage 0 or after the whole MLP in stage 1.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/comm_timing.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/launcher.h"
#include "parallel/pipeline.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_main_start;

double MsSinceMain() {
  return std::chrono::duration<double, std::milli>(Clock::now() - g_main_start).count();
}

std::string EpochNow() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return bench::Fixed(std::chrono::duration<double>(now).count(), 6);
}

struct Config {
  std::string mode = "threads";
  std::string device = "cpu";
  int workers = 2;
  std::vector<int64_t> sizes;
  int64_t batch = 0;  // global
  int micro_batches = 4;
  double bucket_mb = 0;
  int steps = 20, repeats = 5, warmup = 5, comm_iters = 30, large_iters = 10;
  int64_t large_bytes = 64 << 20;
  double collective_timeout_s = 60;
  uint64_t seed = 42;
  int fail_rank = -1, fail_step = 3;
  std::string fail = "throw";

  bool gpu() const { return device == "cuda"; }
};

OptimizerConfig SgdConfig() {
  OptimizerConfig sgd;
  sgd.name = "sgd";
  sgd.lr = 1e-3f;
  sgd.momentum = 0.f;
  return sgd;
}

Tensor RandomNormal(const Shape& shape, Rng& rng, Device device) {
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = rng.Normal();
  return Tensor::FromVector(v, shape, device);
}

void InjectFailure(const Config& c, const std::string& who) {
  std::cerr << "fail_inject " << who << " step=" << c.fail_step << " how=" << c.fail
            << " epoch=" << EpochNow() << std::endl;
  if (c.fail == "kill") std::raise(SIGKILL);
  while (c.fail == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
  throw std::runtime_error("deliberate failure at step " + std::to_string(c.fail_step) +
                           " (--fail_step)");
}

bench::Row CommonRow(const Config& c, double startup_ms, double first_step_ms,
                     double step_ms) {
  std::string sizes;
  for (size_t i = 0; i < c.sizes.size(); ++i) sizes += (i ? "-" : "") + std::to_string(c.sizes[i]);
  bench::Row row;
  row.Add("bench", "model_table").Add("mode", c.mode).Add("device", c.device)
      .Add("mlp", sizes).Add("global_batch", c.batch)
      .Add("startup_ms", startup_ms, 1).Add("first_step_ms", first_step_ms, 1)
      .Add("step_ms", step_ms, 3)
      .Add("samples_per_s", c.batch / (step_ms / 1e3), 0);
  return row;
}

// --- data parallel: Launch + Reducer ----------------------------------------

void RunDataParallel(const Config& c, bench::ResultPrinter& results) {
  LaunchOptions launch;
  launch.mode = ParseLaunchMode(c.mode);
  launch.device = c.device;
  launch.collective_timeout_s = c.collective_timeout_s;
  if (c.mode == "threads") launch.workers = c.workers;
  Launch(launch, [&](Worker& w) {
    Backend& backend = GetBackend(w.device);
    w.comm.Barrier()->Wait();
    if (w.device_comm != nullptr) {
      Tensor one = Tensor::Full({1}, 1.f, w.device);
      w.device_comm->AllReduce(one.data(), 1, ReduceOp::kSum)->Wait();
      backend.Synchronize();
    }
    w.comm.Barrier()->Wait();
    const double startup_ms = MsSinceMain();
    const std::string ready_epoch = EpochNow();

    Rng init(c.seed);
    MlpOptions mlp;
    mlp.device = w.device;
    auto model = Mlp(c.sizes, Activation::kRelu, init, mlp);
    ReducerOptions ro;
    ro.bucket_bytes = static_cast<int64_t>(c.bucket_mb * (1 << 20));
    Reducer reducer(*model, w.gradient_comms(), ro);
    std::unique_ptr<Optimizer> sgd = MakeOptimizer(SgdConfig(), model->Parameters());
    MseLoss loss;
    Rng data(c.seed + 1 + w.rank);
    const int64_t rows = Shard(c.batch, w.rank, w.size).size();
    const Tensor x = RandomNormal({rows, c.sizes.front()}, data, w.device);
    const Tensor y = RandomNormal({rows, c.sizes.back()}, data, w.device);
    int step_number = 0;
    auto step = [&] {
      if (++step_number == c.fail_step && w.rank == c.fail_rank) {
        InjectFailure(c, "rank=" + std::to_string(w.rank));
      }
      sgd->ZeroGrad();
      // Normalised by the global batch: see Note [Gradient averaging].
      loss.Forward(model->Forward(x), y, c.batch);
      reducer.Backward(loss.Backward());
      sgd->Step();
    };
    step();
    backend.Synchronize();
    const double first_step_ms = MsSinceMain();

    for (int i = 0; i < c.warmup; ++i) step();
    std::vector<double> run_ms;
    for (int r = 0; r < c.repeats; ++r) {
      w.comm.Barrier()->Wait();
      backend.Synchronize();
      const std::unique_ptr<LaneEvent> start = bench::TimingEvent(backend.main_lane());
      for (int i = 0; i < c.steps; ++i) step();
      const double ms =
          bench::TimingEvent(backend.main_lane())->ElapsedMsSince(*start) / c.steps;
      run_ms.push_back(bench::MaxOverRanks(w.comm, ms));
    }

    Communicator& grads = w.gradient_comm();
    const double barrier_us = bench::BarrierMicros(w.comm, c.comm_iters);
    const double ar4_us = bench::AllReduceMicros(grads, w.comm, w.device, 4, c.comm_iters);
    const double ar4k_us = bench::AllReduceMicros(grads, w.comm, w.device, 4096, c.comm_iters);
    const double large_us =
        bench::AllReduceMicros(grads, w.comm, w.device, c.large_bytes, c.large_iters);
    if (!w.is_root()) return;
    const std::string comm = grads.Describe();
    bench::Row row = CommonRow(c, startup_ms, first_step_ms, bench::Median(run_ms));
    row.Add("workers", w.size).Add("ready_epoch", ready_epoch)
        .Add("barrier_us", barrier_us, 1).Add("ar4_us", ar4_us, 1)
        .Add("ar4k_us", ar4k_us, 1).Add("ar_large_bytes", c.large_bytes)
        .Add("ar_large_ms", large_us / 1e3, 3)
        .Add("ar_large_GBps", c.large_bytes / (large_us * 1e3), 1)
        .Add("buckets", reducer.num_buckets()).Add("comm", comm.substr(0, comm.find('(')));
    results.Print(row);
  });
}

// --- pipeline ---------------------------------------------------------------

// Identity: hands its input on and its gradient back without computing.
// Given a step counter, it is also the pipeline's stand-in for a worker that
// fails: at the start of step --fail_step it calls InjectFailure.
class PassLayer final : public Layer {
 public:
  explicit PassLayer(std::string name, const Config* c = nullptr, const int* step = nullptr,
                     int stage = 0)
      : name_(std::move(name)), c_(c), step_(step), stage_(stage) {}
  Tensor Forward(const Tensor& x) override {
    // step_ is written by the host between steps (Pipeline::Step orders it).
    if (step_ != nullptr && *step_ == c_->fail_step) {
      InjectFailure(*c_, "stage=" + std::to_string(stage_));
    }
    return x;
  }
  Tensor Backward(const Tensor& dy) override { return dy; }
  std::string Name() const override { return name_; }

 private:
  const std::string name_;
  const Config* c_;
  const int* step_;
  const int stage_;
};

void SynchronizeAll(const std::vector<Device>& devices) {
  for (Device d : devices) GetBackend(d).Synchronize();
}

PipelineOptions StageOptions(const std::vector<Device>& devices, int stages, int micro) {
  PipelineOptions o;
  o.stages = stages;
  o.micro_batches = micro;
  o.devices.assign(devices.begin(), devices.begin() + stages);
  o.optimizer = SgdConfig();
  o.make_loss = [] { return std::make_unique<MseLoss>(); };
  return o;
}

// Two identity layers on `stages` stages: with 2 stages, a step hands an
// activation over and its gradient back, and computes only the loss.
std::unique_ptr<Pipeline> HandoffPipeline(const std::vector<Device>& devices, int stages) {
  auto model = std::make_unique<Sequential>("handoff");
  model->Add(std::make_unique<PassLayer>("pass1"));
  model->Add(std::make_unique<PassLayer>("pass2"));
  return std::make_unique<Pipeline>(std::move(model), StageOptions(devices, stages, 1));
}

// Median microseconds of one step of `p` on an activation of `bytes` (rows
// of at most 1024 floats), every stage device idle before and after.
double HandoffStepMicros(Pipeline& p, const std::vector<Device>& devices, int64_t bytes,
                         int iters) {
  const int64_t n = bytes / 4, cols = n % 1024 == 0 ? 1024 : n;
  const Tensor x = Tensor::Full({n / cols, cols}, 1.f, p.device(0, 0));
  const Tensor y = Tensor::Zeros({n / cols, cols}, p.device(0, p.stages() - 1));
  std::vector<double> us;
  for (int i = 0; i < iters + 2; ++i) {
    SynchronizeAll(devices);
    const auto start = Clock::now();
    p.Step(x, y);
    SynchronizeAll(devices);
    const double us_now = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= 2) us.push_back(us_now);
  }
  return bench::Median(us);
}

void RunPipeline(const Config& c, bench::ResultPrinter& results) {
  std::vector<Device> devices;
  for (int s = 0; s < 2; ++s) devices.push_back(c.gpu() ? Device::Cuda(s) : Device::Cpu());
  std::unique_ptr<Pipeline> two = HandoffPipeline(devices, 2);
  const double startup_ms = MsSinceMain();
  const std::string ready_epoch = EpochNow();

  Rng init(c.seed);
  // Every stage but the first hands its input gradient back (the pipeline
  // asks for it, BackwardArgs::input_grad), so with the fail gate alone in
  // stage 0 the MLP's fc1 computes one.
  auto mlp = Mlp(c.sizes, Activation::kRelu, init);
  int step_number = 0;
  PipelineOptions options = StageOptions(devices, 2, c.micro_batches);
  std::unique_ptr<Sequential> model;
  if (c.fail_rank >= 0) {
    // The gate alone in stage 0, or after the whole MLP in stage 1.
    TANDEM_CHECK(c.fail_rank <= 1) << "--fail_rank must be 0 or 1 for the 2-stage pipeline";
    model = std::make_unique<Sequential>("fail_model");
    auto gate = std::make_unique<PassLayer>("fail_gate", &c, &step_number, c.fail_rank);
    if (c.fail_rank == 0) model->Add(std::move(gate));
    model->Add(std::move(mlp));
    if (c.fail_rank == 1) model->Add(std::move(gate));
    options.boundaries = {1};
  } else {
    model = std::move(mlp);
  }
  Pipeline pipeline(std::move(model), options);
  Rng data(c.seed + 1);
  const Tensor x = RandomNormal({c.batch, c.sizes.front()}, data, devices.front());
  const Tensor y = RandomNormal({c.batch, c.sizes.back()}, data, devices.back());
  auto step = [&] {
    ++step_number;
    pipeline.Step(x, y);
  };
  step();
  SynchronizeAll(devices);
  const double first_step_ms = MsSinceMain();
  for (int i = 0; i < c.warmup; ++i) step();
  std::vector<double> run_ms;
  for (int r = 0; r < c.repeats; ++r) {
    SynchronizeAll(devices);
    const auto start = Clock::now();
    for (int i = 0; i < c.steps; ++i) step();
    SynchronizeAll(devices);
    run_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() /
                     c.steps);
  }

  std::unique_ptr<Pipeline> one = HandoffPipeline(devices, 1);
  double one_stage_us = 0;  // of the last size measured
  auto handoff_us = [&](int64_t bytes, int iters) {
    const double t2 = HandoffStepMicros(*two, devices, bytes, iters);
    one_stage_us = HandoffStepMicros(*one, devices, bytes, iters);
    return (t2 - one_stage_us) / 2;
  };
  const double h4 = handoff_us(4, c.comm_iters), h4k = handoff_us(4096, c.comm_iters);
  const double large = handoff_us(c.large_bytes, c.large_iters);
  bench::Row row = CommonRow(c, startup_ms, first_step_ms, bench::Median(run_ms));
  std::string params;
  for (int s = 0; s < 2; ++s) {
    params += (s ? "," : "") + std::to_string(pipeline.stage_parameter_count(s));
  }
  row.Add("stages", 2).Add("micro_batches", c.micro_batches).Add("stage_params", params)
      .Add("ready_epoch", ready_epoch).Add("barrier_us", "na")
      .Add("handoff4_us", h4, 1).Add("handoff4k_us", h4k, 1)
      .Add("handoff_large_bytes", c.large_bytes).Add("handoff_large_ms", large / 1e3, 3)
      .Add("handoff_large_GBps", c.large_bytes / (large * 1e3), 1)
      .Add("handoff_large_1stage_ms", one_stage_us / 1e3, 3);
  results.Print(row);
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  g_main_start = Clock::now();
  Config c;
  std::string sizes;
  CLI::App app{"Tandem: threads vs MPI ranks vs pipeline, one model, for docs/parallel.md"};
  app.option_defaults()->always_capture_default();
  app.add_option("--mode", c.mode, "threads, mpi (started by mpirun) or pipeline (2 stages)");
  app.add_option("--device", c.device, "cpu or cuda (worker or stage i on cuda:i)");
  app.add_option("--workers", c.workers, "threads mode: data-parallel workers");
  app.add_option("--sizes", sizes,
                 "MLP layer sizes (default 784,1024,1024,10 on cpu, "
                 "1024,4096,4096,4096,4096,1024 on cuda)");
  app.add_option("--batch", c.batch, "global batch (default 256 on cpu, 1024 on cuda)");
  app.add_option("--micro_batches", c.micro_batches, "pipeline micro-batches");
  app.add_option("--bucket_mb", c.bucket_mb, "gradient bucket MiB (default 4 on cpu, 25 on cuda)");
  app.add_option("--steps", c.steps, "timed steps per run");
  app.add_option("--repeats", c.repeats, "timed runs (median reported)");
  app.add_option("--warmup", c.warmup, "untimed steps after the first");
  app.add_option("--comm_iters", c.comm_iters, "repetitions of each latency measurement");
  app.add_option("--large_bytes", c.large_bytes, "large all-reduce / hand-off size in bytes");
  app.add_option("--large_iters", c.large_iters, "repetitions of the large measurement");
  app.add_option("--collective_timeout", c.collective_timeout_s,
                 "seconds before an unfinished collective fails the run");
  app.add_option("--seed", c.seed, "seed for weights and data");
  app.add_option("--fail_rank", c.fail_rank, "worker (pipeline: stage) that fails; -1: none");
  app.add_option("--fail_step", c.fail_step, "the training step (1-based) at which it fails");
  app.add_option("--fail", c.fail, "throw, kill (SIGKILL itself) or hang (sleep forever)");
  CLI11_PARSE(app, argc, argv);
  return bench::RunMain([&] {
    TANDEM_CHECK(c.mode == "threads" || c.mode == "mpi" || c.mode == "pipeline")
        << "--mode must be threads, mpi or pipeline, got '" << c.mode << "'";
    TANDEM_CHECK(c.device == "cpu" || c.device == "cuda")
        << "--device must be cpu or cuda, got '" << c.device << "'";
    TANDEM_CHECK(c.fail == "throw" || c.fail == "kill" || c.fail == "hang")
        << "--fail must be throw, kill or hang, got '" << c.fail << "'";
    TANDEM_CHECK(c.steps >= 1 && c.repeats >= 1 && c.warmup >= 0 && c.comm_iters >= 1 &&
                 c.large_iters >= 1)
        << "--steps, --repeats, --comm_iters and --large_iters must be at least 1, --warmup "
           "at least 0";
    TANDEM_CHECK(c.large_bytes >= 4 && c.large_bytes % 4 == 0)
        << "--large_bytes must be a positive multiple of 4, got " << c.large_bytes;
    if (c.mode == "pipeline" && c.gpu()) {
      TANDEM_CHECK(CudaDeviceCount() >= 2)
          << "--mode=pipeline --device=cuda needs 2 GPUs, but " << CudaDeviceCount()
          << " are visible" << (CudaDeviceCount() == 0 ? " (" + CudaUnavailableReason() + ")" : "");
    }
    c.sizes = !sizes.empty() ? bench::ParseIntList(sizes, "--sizes")
              : c.gpu()      ? std::vector<int64_t>{1024, 4096, 4096, 4096, 4096, 1024}
                             : std::vector<int64_t>{784, 1024, 1024, 10};
    if (c.batch == 0) c.batch = c.gpu() ? 1024 : 256;
    if (c.bucket_mb == 0) c.bucket_mb = c.gpu() ? 25 : 4;
    bench::ResultPrinter results;
    if (c.mode == "pipeline") {
      RunPipeline(c, results);
    } else {
      RunDataParallel(c, results);
    }
    return 0;
  });
}
