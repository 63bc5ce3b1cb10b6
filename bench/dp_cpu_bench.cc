// CPU data-parallel training throughput: an MLP trained on random data with
// Launch + Reducer + SGD, per worker count, overlap setting and bucket size;
// plus all-reduce (small and large) and barrier latency measured on the same
// communicator.
//
//   bazel build -c opt //bench:dp_cpu_bench
//   bazel-bin/bench/dp_cpu_bench --workers=1,2,4 --overlap=both
//   mpirun --allow-run-as-root --oversubscribe -np 2 bazel-bin/bench/dp_cpu_bench --mode=mpi
//
// Each configuration prints one machine-readable line,
//   result bench=dp_cpu mode=threads workers=2 overlap=on bucket_mb=4 ...
// and rank 0 ends with a table of all of them. Times:
//   step_ms       wall time per training step (Forward, loss,
//                 Reducer::BackwardWith writing the gradients, Step): each
//                 of --repeats runs of --steps steps gives a mean (slowest
//                 rank); the median run's, and the fastest run's as
//                 step_ms_min;
//   comm_wait_ms  Reducer::last_comm_wait_seconds() per step, mean over all
//                 timed steps and ranks: how long the end of backward waited
//                 for all-reduces (0 with one worker: nothing to reduce);
//   ar_*_us       median over --comm_iters of one AllReduce (kAverage) of
//                 that many bytes, each after a Barrier, slowest rank;
//   barrier_us    median over --comm_iters of one Barrier, slowest rank.
//   gflops        GEMM arithmetic of one step (forward, weight and input
//                 gradients: 2 x batch x in x out per product) / step_ms,
//                 all ranks together; gflops_per_core divides it by the
//                 cores in use, min(hardware threads, workers x
//                 cpu_threads), so it compares with one core's peak.
// Before the results a line `machine ...` names the CPU's vector ISA
// (avx2, avx512f, avx512_bf16 from /proc/cpuinfo) and the GEMM library with
// the kernels it chose; --cpu_threads sets the intra-op threads of each
// worker (0: hardware threads / workers, see core/cpu/cpu_threads.h).
// --precision=bf16 trains in bfloat16 (layers/precision.h: bf16 activations
// and GEMMs, float32 master weights and gradients).
// --variants runs each configuration as each of: plain (the all-reduce, then
// SGD's Step), sharded (ZeRO-1: ShardedOptimizerHook, as --shard_optimizer),
// deterministic (each batch in --micro_shards pieces summed in one fixed
// tree: DeterministicSumHook, as --deterministic) and
// deterministic+sharded; comma-separated.
// loss_first / loss_last are the global-batch loss of the first warm-up step
// and of the last timed step (cross-entropy against random labels, so it
// barely falls); `replicas` is "same" when every rank ends with bitwise-equal
// parameters.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/comm_timing.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/cpu/cpu_threads.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "layers/precision.h"
#include "parallel/deterministic_sum.h"
#include "parallel/launcher.h"
#include "parallel/reducer.h"
#include "parallel/sharded_optimizer.h"
#include "parallel/sharding.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct BenchConfig {
  std::string mode = "threads";
  std::vector<int64_t> workers = {1};  // threads mode only
  std::vector<bool> overlaps = {true, false};
  std::vector<double> bucket_mbs = {4.0};
  // "plain", "sharded", "deterministic", "deterministic+sharded".
  std::vector<std::string> variants = {"plain"};
  int micro_shards = 4;  // deterministic variants' pieces per batch
  // Sharded variants: the parameter gathers run beside the next forward
  // (ShardedOptimizerOptions::gather_during_forward), as in the Trainer.
  bool gather_during_forward = true;
  std::vector<int64_t> hidden = {1024, 1024};
  int64_t inputs = 784;
  int64_t classes = 10;
  int64_t batch_size = 256;  // global
  int steps = 20;    // per timed run
  int repeats = 3;   // timed runs; step_ms is the median run's
  int warmup = 3;
  float lr = 0.01f;
  uint64_t seed = 42;
  int data_sets = 4;  // distinct random batches, used in turn
  int comm_iters = 20;
  int64_t small_bytes = 4 << 10;
  int64_t large_bytes = 16 << 20;
  int cpu_threads = 0;  // 0: the launcher's sizing
  Precision precision = Precision::kFp32;  // the model's (layers/precision.h)
};

// GEMM floating-point operations of one training step of the MLP on the
// global batch: forward and weight gradient of every layer, input gradient
// of every layer but the first.
double StepGemmFlops(const BenchConfig& c) {
  std::vector<int64_t> sizes = {c.inputs};
  sizes.insert(sizes.end(), c.hidden.begin(), c.hidden.end());
  sizes.push_back(c.classes);
  double products = 0;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    products += (l == 0 ? 2.0 : 3.0) * static_cast<double>(sizes[l] * sizes[l + 1]);
  }
  return 2.0 * static_cast<double>(c.batch_size) * products;
}

// "avx2=yes avx512f=no avx512_bf16=no": the vector extensions the CPU
// reports in /proc/cpuinfo's first flags line.
std::string CpuIsa() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {}
  std::istringstream words(line);
  std::vector<std::string> flags{std::istream_iterator<std::string>(words), {}};
  std::string isa;
  for (const char* want : {"avx2", "fma", "avx512f", "avx512_bf16"}) {
    const bool has = std::find(flags.begin(), flags.end(), want) != flags.end();
    isa += std::string(isa.empty() ? "" : " ") + want + (has ? "=yes" : "=no");
  }
  return isa;
}

// Latencies of the worker's communicator, all ranks' worst.
struct CommLatency {
  double small_us = 0, large_us = 0, barrier_us = 0;
};

CommLatency MeasureComm(Communicator& comm, const BenchConfig& c) {
  CommLatency latency;
  const Device cpu = Device::Cpu();
  latency.small_us = bench::AllReduceMicros(comm, comm, cpu, c.small_bytes, c.comm_iters);
  latency.large_us = bench::AllReduceMicros(comm, comm, cpu, c.large_bytes, c.comm_iters);
  latency.barrier_us = bench::BarrierMicros(comm, c.comm_iters);
  return latency;
}

// FNV-1a of every parameter's bytes, in parameter order.
uint64_t ParameterHash(Sequential& model) {
  uint64_t h = 1469598103934665603ull;
  for (NamedParameter& p : model.Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); ++i) {
      h = (h ^ bytes[i]) * 1099511628211ull;
    }
  }
  return h;
}

// Whether every rank holds the same parameters: the hash travels as four
// 16-bit pieces, each exact in a float.
bool ReplicasIdentical(Communicator& comm, Sequential& model) {
  const uint64_t h = ParameterHash(model);
  float mine[4];
  for (int i = 0; i < 4; ++i) mine[i] = static_cast<float>((h >> (16 * i)) & 0xffff);
  std::vector<float> all(4 * static_cast<size_t>(comm.size()));
  comm.AllGather(mine, 4, all.data())->Wait();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != mine[i % 4]) return false;
  }
  return true;
}

struct RandomData {
  std::vector<Tensor> x;       // [batch, inputs]
  std::vector<Tensor> labels;  // [batch], class indices as floats
};

// The same global batches on every rank (same seed); each rank slices its
// shard.
RandomData MakeData(const BenchConfig& c) {
  Rng rng(c.seed + 1);
  RandomData data;
  for (int s = 0; s < c.data_sets; ++s) {
    std::vector<float> x(static_cast<size_t>(c.batch_size * c.inputs));
    for (float& v : x) v = rng.Normal();
    std::vector<float> y(static_cast<size_t>(c.batch_size));
    for (float& v : y) v = static_cast<float>(rng.UniformInt(c.classes));
    data.x.push_back(Tensor::FromVector(x, {c.batch_size, c.inputs}));
    data.labels.push_back(Tensor::FromVector(y, {c.batch_size}));
  }
  return data;
}

// A result row's configuration fields.
bench::Row ConfigRow(const BenchConfig& c, int workers, const std::string& variant, bool overlap,
                     double bucket_mb, int64_t buckets, int64_t params) {
  bench::Row row;
  row.Add("bench", "dp_cpu")
      .Add("mode", c.mode)
      .Add("workers", workers)
      .Add("variant", variant)
      .Add("precision", PrecisionName(c.precision))
      .Add("overlap", overlap ? "on" : "off")
      .Add("bucket_mb", bench::Fixed(bucket_mb, bucket_mb == std::floor(bucket_mb) ? 0 : 2))
      .Add("buckets", buckets)
      .Add("batch", c.batch_size)
      .Add("params", params)
      .Add("steps", c.steps)
      .Add("repeats", c.repeats);
  return row;
}

// The step times and what follows from them.
void AddTimes(bench::Row& row, const BenchConfig& c, int workers, double step_ms,
              double step_ms_min, double wait_ms) {
  const int threads = cpu::CpuThreads();
  const double gflops = StepGemmFlops(c) / (step_ms * 1e6);
  const int cores = std::min(cpu::HardwareThreads(), workers * threads);
  row.Add("step_ms", step_ms, 2)
      .Add("step_ms_min", step_ms_min, 2)
      .Add("samples_per_s", c.batch_size / (step_ms / 1e3), 0)
      .Add("cpu_threads", threads)
      .Add("gflops", gflops, 1)
      .Add("gflops_per_core", gflops / cores, 1)
      .Add("comm_wait_ms", wait_ms, 3)
      .Add("comm_wait_pct", 100.0 * wait_ms / step_ms, 1);
}

void AddLatencies(bench::Row& row, const BenchConfig& c, const CommLatency& latency) {
  row.Add("ar_small_bytes", c.small_bytes)
      .Add("ar_small_us", latency.small_us, 1)
      .Add("ar_large_bytes", c.large_bytes)
      .Add("ar_large_us", latency.large_us, 1)
      .Add("ar_large_GBps", c.large_bytes / (latency.large_us * 1e3), 2)
      .Add("barrier_us", latency.barrier_us, 1);
}

// This rank's rows of a batch, and its pieces (rows within them): one piece,
// or with a deterministic variant its micro-shards (MicroShardBlock).
struct RankRows {
  ShardRange rows;
  std::vector<ShardRange> pieces;
};

RankRows RowsOf(const BenchConfig& c, const Worker& worker, bool deterministic) {
  RankRows r;
  if (!deterministic) {
    r.rows = Shard(c.batch_size, worker.rank, worker.size);
    r.pieces = {{0, r.rows.size()}};
    return r;
  }
  r.rows = MicroShardBlock(c.batch_size, c.micro_shards, worker.rank, worker.size);
  r.pieces = MicroShardPieces(c.batch_size, c.micro_shards, worker.rank, worker.size);
  return r;
}

// One configuration on this worker; returns the row (meaningful on rank 0).
bench::Row RunConfig(Worker& worker, const BenchConfig& c, const RandomData& data,
                     const std::string& variant, bool overlap, double bucket_mb,
                     const CommLatency& latency) {
  const bool sharded = variant == "sharded" || variant == "deterministic+sharded";
  const bool deterministic = variant.rfind("deterministic", 0) == 0;
  std::vector<int64_t> sizes = {c.inputs};
  sizes.insert(sizes.end(), c.hidden.begin(), c.hidden.end());
  sizes.push_back(c.classes);
  Rng init(c.seed);
  MlpOptions mlp;
  mlp.precision = c.precision;
  auto model = Mlp(sizes, Activation::kRelu, init, mlp);
  ReducerOptions options;
  options.bucket_bytes = static_cast<int64_t>(bucket_mb * (1 << 20));
  options.overlap = overlap;
  options.shard_optimizer = sharded;
  Reducer reducer(*model, worker.comm, options);
  SgdParams sgd_params;
  sgd_params.lr = c.lr;
  Sgd sgd(model->Parameters(), sgd_params);
  DeterministicSumHook* tree = nullptr;
  std::unique_ptr<CommHook> sum;
  if (deterministic) {
    auto hook = std::make_unique<DeterministicSumHook>();
    tree = hook.get();
    sum = std::move(hook);
  }
  ShardedOptimizerHook* sharded_hook = nullptr;
  if (sharded) {
    ShardedOptimizerOptions sharded_options;
    sharded_options.gather_during_forward = c.gather_during_forward;
    auto hook = std::make_unique<ShardedOptimizerHook>(sgd, sharded_options, std::move(sum));
    sharded_hook = hook.get();
    reducer.RegisterCommHook(std::move(hook));
  } else if (sum) {
    reducer.RegisterCommHook(std::move(sum));
  }
  SoftmaxCrossEntropyLoss loss;

  const RankRows mine = RowsOf(c, worker, deterministic);
  const ShardRange shard = mine.rows;
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < c.data_sets; ++s) {
    xs.push_back(data.x[s].Slice(shard.begin, shard.end));
    ys.push_back(data.labels[s].Slice(shard.begin, shard.end));
  }

  double comm_wait = 0;
  float first_loss = 0, last_loss = 0;
  // The Trainer's step: Backward writes the gradients (no ZeroGrad pass).
  BackwardArgs backward = BackwardArgs::For(worker.device);
  backward.input_grad = false;
  backward.grad_mode = GradMode::kOverwrite;
  // Returns this rank's share of the loss (the CPU backend has finished).
  auto step = [&](int i) {
    float value = 0.f;
    for (size_t j = 0; j < mine.pieces.size(); ++j) {
      const ShardRange& piece = mine.pieces[j];
      const bool last = j + 1 == mine.pieces.size();
      Tensor logits = reducer.Forward(xs[i % c.data_sets].Slice(piece.begin, piece.end));
      // Normalised by the global batch: see Note [Gradient averaging].
      value += loss.Forward(logits, ys[i % c.data_sets].Slice(piece.begin, piece.end),
                            c.batch_size)
                   .Item();
      reducer.BackwardWith(loss.Backward(), backward,
                           last ? GradientSync::kReduce : GradientSync::kAccumulateLocally);
      if (!last) tree->KeepLeaf(backward.lane);
    }
    if (!sharded) sgd.Step();  // the sharded hook stepped
    comm_wait += reducer.last_comm_wait_seconds();
    return value;
  };

  for (int i = 0; i < c.warmup; ++i) {
    const float value = step(i);
    if (i == 0) first_loss = value;
  }
  comm_wait = 0;
  float value = 0.f;
  int k = c.warmup;
  std::vector<double> run_ms;  // per run: ms per step, slowest rank
  for (int r = 0; r < c.repeats; ++r) {
    worker.comm.Barrier()->Wait();
    const auto start = Clock::now();
    for (int i = 0; i < c.steps; ++i) value = step(k++);
    reducer.WaitForParameters();  // the last step's gathers, where they overlap
    run_ms.push_back(bench::MaxOverRanks(worker.comm, 1e3 * SecondsSince(start) / c.steps));
  }
  last_loss = value;

  // Each rank's loss is its shard's share of the global-batch mean.
  float losses[2] = {first_loss, last_loss};
  worker.comm.AllReduce(losses, 2, ReduceOp::kSum)->Wait();
  first_loss = losses[0];
  last_loss = losses[1];
  const double step_ms = bench::Median(run_ms);
  const double step_ms_min = *std::min_element(run_ms.begin(), run_ms.end());
  const double wait_ms = bench::MeanOverRanks(
      worker.comm, 1e3 * comm_wait / (static_cast<double>(c.steps) * c.repeats));
  // Sharded in bf16, the step gathers working copies; the masters, whole.
  if (sharded_hook != nullptr) sharded_hook->GatherMasters();
  const bool same = ReplicasIdentical(worker.comm, *model);
  TANDEM_CHECK(std::isfinite(last_loss)) << "loss is not finite; lower --lr";
  bench::Row row = ConfigRow(c, worker.size, variant, overlap, bucket_mb,
                             reducer.num_buckets(), ParameterCount(*model));
  AddTimes(row, c, worker.size, step_ms, step_ms_min, wait_ms);
  AddLatencies(row, c, latency);
  row.Add("loss_first", first_loss, 4)
      .Add("loss_last", last_loss, 4)
      .Add("replicas", same ? "same" : "DIFFER");
  return row;
}

void RunLaunch(const BenchConfig& c, const LaunchOptions& launch,
               bench::ResultPrinter& results) {
  const RandomData data = MakeData(c);
  Launch(launch, [&](Worker& worker) {
    const CommLatency latency = MeasureComm(worker.comm, c);
    for (const std::string& variant : c.variants) {
      for (bool overlap : c.overlaps) {
        for (double bucket_mb : c.bucket_mbs) {
          bench::Row row = RunConfig(worker, c, data, variant, overlap, bucket_mb, latency);
          if (worker.is_root()) results.PrintAndKeep(row);
        }
      }
    }
  });
}

// The counts and sizes given by flags.
void CheckCounts(const BenchConfig& c) {
  TANDEM_CHECK(c.steps >= 1 && c.warmup >= 1 && c.repeats >= 1)
      << "--steps, --repeats and --warmup must be at least 1, got " << c.steps << ", "
      << c.repeats << " and " << c.warmup;
  TANDEM_CHECK(c.comm_iters >= 1) << "--comm_iters must be at least 1";
  TANDEM_CHECK(c.small_bytes >= 4 && c.small_bytes % 4 == 0 && c.large_bytes >= 4 &&
               c.large_bytes % 4 == 0)
      << "--small_bytes and --large_bytes must be positive multiples of 4";
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  BenchConfig c;
  std::string workers = "1", overlap = "both", bucket_mb = "4", hidden = "1024,1024";
  std::string precision = "fp32", variants = "plain";
  CLI::App app{"Tandem: CPU data-parallel training throughput and collective latency"};
  app.option_defaults()->always_capture_default();
  app.add_option("--mode", c.mode, "threads (one process) or mpi (started by mpirun)");
  app.add_option("--workers", workers,
                 "threads mode: worker counts to run, comma-separated (e.g. 1,2,4)");
  app.add_option("--overlap", overlap, "both, on or off: all-reduce during backward or after");
  app.add_option("--bucket_mb", bucket_mb, "gradient bucket sizes in MiB, comma-separated");
  app.add_option("--hidden", hidden, "hidden layer sizes, comma-separated");
  app.add_option("--precision", precision,
                 "fp32 or bf16 (bfloat16 activations and GEMMs, float32 master weights)");
  app.add_option("--batch_size", c.batch_size, "global batch, split across workers");
  app.add_option("--steps", c.steps, "timed steps per run");
  app.add_option("--repeats", c.repeats, "timed runs per configuration (median reported)");
  app.add_option("--warmup", c.warmup, "untimed steps first");
  app.add_option("--lr", c.lr, "SGD learning rate");
  app.add_option("--seed", c.seed, "seed for weights and data");
  app.add_option("--comm_iters", c.comm_iters, "repetitions of each latency measurement");
  app.add_option("--small_bytes", c.small_bytes, "small all-reduce size in bytes");
  app.add_option("--large_bytes", c.large_bytes, "large all-reduce size in bytes");
  app.add_option("--variants", variants,
                 "plain, sharded, deterministic and/or deterministic+sharded, comma-separated");
  app.add_option("--gather_during_forward", c.gather_during_forward,
                 "sharded variants: gather the parameters beside the next forward (true, as "
                 "the Trainer does) or before the step returns (false)");
  app.add_option("--micro_shards", c.micro_shards,
                 "deterministic variants: pieces per batch (a power of two)");
  app.add_option("--cpu_threads", c.cpu_threads,
                 "intra-op threads per worker; 0: hardware threads / workers");
  CLI11_PARSE(app, argc, argv);

  return bench::RunMain([&] {
    TANDEM_CHECK(overlap == "both" || overlap == "on" || overlap == "off")
        << "--overlap must be both, on or off, got '" << overlap << "'";
    c.overlaps = overlap == "both" ? std::vector<bool>{true, false}
                                   : std::vector<bool>{overlap == "on"};
    c.bucket_mbs = bench::ParseDoubleList(bucket_mb, "--bucket_mb");
    c.hidden = bench::ParseIntList(hidden, "--hidden");
    c.precision = ParsePrecision(precision);
    c.variants = bench::SplitList(variants);
    TANDEM_CHECK(!c.variants.empty()) << "--variants is empty";
    for (const std::string& v : c.variants) {
      TANDEM_CHECK(v == "plain" || v == "sharded" || v == "deterministic" ||
                   v == "deterministic+sharded")
          << "--variants: '" << v
          << "' is not a variant; use plain, sharded, deterministic or deterministic+sharded";
    }
    TANDEM_CHECK(IsPowerOfTwo(c.micro_shards))
        << "--micro_shards must be a power of two, got " << c.micro_shards;
    CheckCounts(c);

    cpu::SetCpuThreads(c.cpu_threads);
    const std::string backend = GetBackend(Device::Cpu()).Describe();
    std::cout << "machine " << CpuIsa() << " hardware_threads=" << cpu::HardwareThreads()
              << " backend=\"" << backend << "\"\n";
    const LaunchMode mode = ParseLaunchMode(c.mode);
    bench::ResultPrinter results;
    if (mode == LaunchMode::kMpi) {
      TANDEM_CHECK(app.count("--workers") == 0)
          << "--workers cannot be used with --mode=mpi; the world size comes from mpirun (-np)";
      LaunchOptions launch;
      launch.mode = mode;
      RunLaunch(c, launch, results);
    } else {
      c.workers = bench::ParseIntList(workers, "--workers");
      for (int64_t w : c.workers) {
        TANDEM_CHECK(c.batch_size >= w) << "--batch_size=" << c.batch_size
                                        << " is smaller than --workers=" << w;
        LaunchOptions launch;
        launch.mode = mode;
        launch.workers = static_cast<int>(w);
        RunLaunch(c, launch, results);
      }
    }
    const std::vector<bench::Row> rows = results.kept();
    if (!rows.empty()) {
      std::ostringstream caption;
      caption << "hardware threads: " << std::thread::hardware_concurrency() << "; model 784-"
              << hidden << "-10 (" << rows[0].Get("params") << " params), global batch "
              << c.batch_size << ", " << c.repeats << " runs of " << c.steps
              << " timed steps after " << c.warmup << " warm-up steps";
      results.PrintTable({"mode", "precision", "workers", "variant", "cpu_threads", "overlap",
                          "bucket_mb", "buckets", "step_ms", "step_ms_min", "samples_per_s",
                          "gflops", "gflops_per_core", "comm_wait_ms", "ar_small_us",
                          "ar_large_us", "ar_large_GBps", "barrier_us", "replicas"},
                         caption.str());
    }
    return 0;
  });
}
