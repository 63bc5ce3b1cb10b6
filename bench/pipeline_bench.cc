// Pipeline-parallel training throughput against the number of micro-batches,
// and the measured pipeline bubble against GPipe's model.
//
//   bazel build -c opt //bench:pipeline_bench
//   bazel-bin/bench/pipeline_bench                                  # CPU threads
//   bazel-bin/bench/pipeline_bench --device=cuda                    # cuda:0 | cuda:1
//   bazel-bin/bench/pipeline_bench --device=cuda --sizes=1024,4096,4096,4096,1024
//
// An MLP (ReLU hidden layers, MSE against N(0, 1) targets, SGD) is split into
// --stages stages balanced by parameter count (BalanceStages), stage s on
// cuda:s (--device=cuda) or a CPU thread (--device=cpu), and trained with
// parallel/pipeline.h's GPipe schedule for each --micro_batches count M. A
// row with stages=1, micro_batches=1 is the same model on one device, for
// reference (no recompute there).
//
// Per configuration, --warmup untimed steps, then --steps timed steps. Each
// timed step starts and ends with every stage device idle (synchronised), so
//   wall      = host time of one step (Pipeline::Step plus the wait for the
//               devices to finish it), summed over steps;
//   busy[s]   = Pipeline::LastBusySeconds(): stage s's compute per step,
//               from timing events on its device's main lane around each
//               micro-batch's forward, and around recompute + backward (the
//               host clock on the CPU, device time on a GPU), summed over
//               steps;
//   bubble    = 1 - sum_s busy[s] / (stages x wall): the measured idle share;
//   bubble_model     = (S - 1) / (M + S - 1): GPipe's bubble, equal stages;
//   bubble_model_imb = the same model with the measured per-stage times t_s =
//                      busy[s] / M: 1 - sum_s busy[s] / (S x (sum_s t_s +
//                      (M - 1) max_s t_s)), which accounts for unequal
//                      stages.
// samples_per_s = batch x steps / wall.
//
// Recompute (Note [Recompute] in parallel/pipeline_stage.cc) costs M - 1 extra
// micro-batch forwards per stage: it is in the busy time, so it does not
// shrink the bubble, but it lowers throughput against the one-device row.
//
// Output: one "result bench=pipeline ..." key=value line per configuration,
// then a table.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/pipeline.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchConfig {
  std::string device = "cpu";
  std::vector<int64_t> sizes;
  int64_t batch = 0;
  int stages = 2;
  std::vector<int64_t> micro_batches = {1, 2, 4, 8, 16};
  int steps = 10;
  int warmup = 3;
  uint64_t seed = 42;
};

std::string SizesText(const std::vector<int64_t>& sizes) {
  std::string text;
  for (size_t i = 0; i < sizes.size(); ++i) text += (i ? "-" : "") + std::to_string(sizes[i]);
  return text;
}

void SynchronizeAll(const std::vector<Device>& devices) {
  for (Device d : devices) GetBackend(d).Synchronize();
}

bench::Row Run(const BenchConfig& c, int stages, int micro) {
  std::vector<Device> devices;
  for (int s = 0; s < stages; ++s) {
    devices.push_back(c.device == "cuda" ? Device::Cuda(s) : Device::Cpu());
  }
  Rng rng(c.seed);
  PipelineOptions options;
  options.stages = stages;
  options.micro_batches = micro;
  options.devices = devices;
  options.optimizer.name = "sgd";
  options.optimizer.lr = 1e-3f;
  options.optimizer.momentum = 0.f;
  options.make_loss = [] { return std::make_unique<MseLoss>(); };
  options.record_timing = true;
  Pipeline pipeline(Mlp(c.sizes, Activation::kRelu, rng), options);

  Rng data(c.seed + 1);
  std::vector<float> x(c.batch * c.sizes.front()), y(c.batch * c.sizes.back());
  for (float& v : x) v = data.Normal();
  for (float& v : y) v = data.Normal();
  const Tensor xs = Tensor::FromVector(x, {c.batch, c.sizes.front()}, devices.front());
  const Tensor ys = Tensor::FromVector(y, {c.batch, c.sizes.back()}, devices.back());

  for (int i = 0; i < c.warmup; ++i) pipeline.Step(xs, ys);
  SynchronizeAll(devices);
  double wall = 0;
  std::vector<double> busy(stages, 0.0);
  for (int i = 0; i < c.steps; ++i) {
    const auto start = Clock::now();
    pipeline.Step(xs, ys);
    SynchronizeAll(devices);
    wall += std::chrono::duration<double>(Clock::now() - start).count();
    const std::vector<double> b = pipeline.LastBusySeconds();
    for (int s = 0; s < stages; ++s) busy[s] += b[s];
  }
  const float loss = pipeline.LastLoss();

  const double busy_sum = std::accumulate(busy.begin(), busy.end(), 0.0);
  const double per_micro_max = *std::max_element(busy.begin(), busy.end()) / micro;
  const double modelled_wall = busy_sum / micro + (micro - 1) * per_micro_max;
  bench::Row row;
  row.Add("bench", "pipeline")
      .Add("device", c.device)
      .Add("mlp", SizesText(c.sizes))
      .Add("batch", c.batch)
      .Add("stages", stages)
      .Add("micro_batches", micro)
      .Add("micro_batch", c.batch / micro)
      .Add("step_ms", 1000.0 * wall / c.steps, 3)
      .Add("samples_per_s", c.batch * c.steps / wall, 0);
  std::string busy_ms, params;
  for (int s = 0; s < stages; ++s) {
    busy_ms += (s ? "," : "") + bench::Fixed(1000.0 * busy[s] / c.steps, 3);
    params += (s ? "," : "") + std::to_string(pipeline.stage_parameter_count(s));
  }
  row.Add("stage_params", params)
      .Add("busy_ms", busy_ms)
      .Add("bubble", 1.0 - busy_sum / (stages * wall), 3)
      .Add("bubble_model", GpipeBubbleFraction(stages, micro), 3)
      .Add("bubble_model_imb", 1.0 - busy_sum / (stages * modelled_wall), 3)
      .Add("loss", static_cast<double>(loss), 5);
  return row;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  using namespace tandem;
  BenchConfig c;
  std::string sizes, micro = "1,2,4,8,16";
  CLI::App app{"Tandem: pipeline-parallel throughput and bubble vs micro-batches"};
  app.option_defaults()->always_capture_default();
  app.add_option("--device", c.device, "cpu (a thread per stage) or cuda (stage s on cuda:s)");
  app.add_option("--sizes", sizes,
                 "MLP layer sizes, comma-separated (default 512,512,512,512,512 on "
                 "cpu, 1024,4096,4096,4096,4096,1024 on cuda)");
  app.add_option("--batch", c.batch, "global batch (default 512 on cpu, 4096 on cuda)");
  app.add_option("--stages", c.stages, "pipeline stages");
  app.add_option("--micro_batches", micro, "micro-batch counts, comma-separated");
  app.add_option("--steps", c.steps, "timed steps per configuration");
  app.add_option("--warmup", c.warmup, "untimed steps first");
  app.add_option("--seed", c.seed, "seed for weights and data");
  CLI11_PARSE(app, argc, argv);

  try {
    TANDEM_CHECK(c.device == "cpu" || c.device == "cuda")
        << "--device must be cpu or cuda, got '" << c.device << "'";
    const bool gpu = c.device == "cuda";
    if (gpu) {
      TANDEM_CHECK(CudaDeviceCount() >= c.stages)
          << "--device=cuda with --stages=" << c.stages << " needs " << c.stages
          << " GPUs, but " << CudaDeviceCount() << " are visible"
          << (CudaDeviceCount() == 0 ? " (" + CudaUnavailableReason() + ")" : "");
    }
    c.sizes = sizes.empty() ? (gpu ? std::vector<int64_t>{1024, 4096, 4096, 4096, 4096, 1024}
                                   : std::vector<int64_t>{512, 512, 512, 512, 512})
                            : bench::ParseIntList(sizes, "--sizes");
    if (c.batch == 0) c.batch = gpu ? 4096 : 512;
    c.micro_batches = bench::ParseIntList(micro, "--micro_batches");
    TANDEM_CHECK(c.stages >= 2) << "--stages must be at least 2, got " << c.stages;
    TANDEM_CHECK(c.steps >= 1 && c.warmup >= 1)
        << "--steps and --warmup must be at least 1, got " << c.steps << " and " << c.warmup;

    std::vector<bench::Row> rows;
    rows.push_back(Run(c, 1, 1));
    std::cout << rows.back().KeyValues() << std::endl;
    for (int64_t m : c.micro_batches) {
      TANDEM_CHECK(m >= 1 && m <= c.batch)
          << "--micro_batches value " << m << " must be in [1, --batch=" << c.batch << "]";
      rows.push_back(Run(c, c.stages, static_cast<int>(m)));
      std::cout << rows.back().KeyValues() << std::endl;
    }
    std::cout << "\n" << c.device << ": model " << SizesText(c.sizes) << ", batch "
              << c.batch << ", " << c.steps << " timed steps after " << c.warmup
              << "; hardware threads " << std::thread::hardware_concurrency() << "\n";
    bench::PrintTable(rows,
                      {"stages", "micro_batches", "micro_batch", "step_ms", "samples_per_s",
                       "stage_params", "busy_ms", "bubble", "bubble_model",
                       "bubble_model_imb"},
                      std::cout);
  } catch (const std::exception& e) {
    std::cerr << "pipeline_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
