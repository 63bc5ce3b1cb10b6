// The pipeline on GPUs (tagged "gpu"): two stages on cuda:0 and cuda:1 train
// like one device, the step never blocks the host, stages may share a GPU or
// sit on the CPU beside a GPU, stage replicas all-reduce through device
// communicators, and busy time comes from device timing events. Also the
// probe the cross-device hand-off relies on, through the same Backend calls
// the pipeline makes: a lane of one GPU waiting on an ordering event recorded
// on another GPU's lane, in one process, is ordered after that GPU's work.
// Tests that need more GPUs than are visible skip, saying why; the error
// test runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/pipeline.h"
#include "tests/support/dp_training.h"
#include "tests/support/sanitizer.h"

namespace tandem {
namespace {

using testing::MaxRelativeDifference;

// GPU (cuBLAS, fp32, no TF32) against the CPU reference, and micro-batch
// against whole-batch sums: rounding differs twice, so the bar is 1e-4
// rather than the CPU suite's 1e-5.
constexpr double kTolerance = 1e-4;

#define REQUIRE_GPUS(n)                                                        \
  do {                                                                         \
    const int visible = CudaDeviceCount();                                     \
    if (visible < (n)) {                                                       \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << visible        \
                   << " visible"                                               \
                   << (visible == 0 ? " (" + CudaUnavailableReason() + ")"     \
                                    : std::string());                          \
    }                                                                          \
  } while (0)

struct TrainSetup {
  std::vector<int64_t> sizes = {32, 64, 64, 64, 10};
  int steps = 4;
  int64_t batch = 40;
};

std::unique_ptr<Sequential> MakeModel(const TrainSetup& setup, uint64_t seed) {
  Rng rng(seed);
  return Mlp(setup.sizes, Activation::kRelu, rng);
}

OptimizerConfig Config() {
  OptimizerConfig config;
  config.name = "sgd";
  config.lr = 0.05f;
  config.momentum = 0.9f;
  return config;
}

std::pair<Tensor, Tensor> Batch(const TrainSetup& setup, int step) {
  Rng data(1000 + step);
  const int64_t in = setup.sizes.front();
  std::vector<float> x(setup.batch * in), y(setup.batch);
  for (float& v : x) v = data.Normal();
  for (float& v : y) v = static_cast<float>(data.UniformInt(setup.sizes.back()));
  return {Tensor::FromVector(x, {setup.batch, in}), Tensor::FromVector(y, {setup.batch})};
}

std::vector<float> Flatten(const std::vector<NamedParameter>& params) {
  std::vector<float> flat;
  for (const NamedParameter& p : params) {
    const std::vector<float> v = p.value().ToVector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

// Single-device training on the CPU: the reference.
std::vector<float> TrainReference(const TrainSetup& setup) {
  auto model = MakeModel(setup, 100);
  auto optimizer = MakeOptimizer(Config(), model->Parameters());
  SoftmaxCrossEntropyLoss loss;
  for (int step = 0; step < setup.steps; ++step) {
    auto [x, y] = Batch(setup, step);
    optimizer->ZeroGrad();
    loss.Forward(model->Forward(x), y);
    model->Backward(loss.Backward());
    optimizer->Step();
  }
  return Flatten(model->Parameters());
}

struct GpuRun {
  std::vector<std::vector<float>> params;  // per replica
  int64_t host_waits_in_steps = 0;         // after the first (warm-up) step
};

// Trains on `devices` (replica-major). Inputs go to the first stage's device
// and labels to the last stage's before the step, so the step itself has no
// reason to wait.
GpuRun TrainOnDevices(const TrainSetup& setup, int stages, int micro,
                      const std::vector<Device>& devices) {
  const int replicas = static_cast<int>(devices.size()) / stages;
  std::vector<std::unique_ptr<Sequential>> models;
  for (int r = 0; r < replicas; ++r) models.push_back(MakeModel(setup, 100 + r));
  PipelineOptions options;
  options.stages = stages;
  options.micro_batches = micro;
  options.devices = devices;
  options.optimizer = Config();
  Pipeline pipeline(std::move(models), options);
  GpuRun run;
  for (int step = 0; step < setup.steps; ++step) {
    auto [x, y] = Batch(setup, step);
    if (replicas == 1) {
      x = x.To(devices.front());
      y = y.To(devices.back());
      for (Device d : devices) GetBackend(d).Synchronize();
    }
    const int64_t before = cuda::HostWaitCount();
    pipeline.Step(x, y);
    if (step > 0) run.host_waits_in_steps += cuda::HostWaitCount() - before;
  }
  EXPECT_TRUE(std::isfinite(pipeline.LastLoss()));
  for (int r = 0; r < replicas; ++r) run.params.push_back(Flatten(pipeline.Parameters(r)));
  return run;
}

// The property Note [Cross-device hand-off] in parallel/pipeline_handoff.cc
// rests on, checked both ways with the Backend calls the hand-off makes: GPU
// `dst`'s main lane waits on an ordering event recorded on GPU `src`'s main
// lane after ~0.1 s of GEMMs, then copies src's result (CopyFromPeer); the
// copy must see the finished result, not the -1 the buffer held before.
TEST(PipelineGpuTest, CrossDeviceEventOrdersAnotherGpusLane) {
  REQUIRE_GPUS(2);
  // Smaller under compute-sanitizer; still pending when waited on, which the
  // test checks.
  const int64_t n = testing::BusyGemmSide();
  for (auto [src, dst] : {std::pair<int, int>{0, 1}, {1, 0}}) {
    const Device from = Device::Cuda(src), to = Device::Cuda(dst);
    Backend& producer = GetBackend(from);
    Backend& receiver = GetBackend(to);
    receiver.EnablePeerAccess(from);
    Tensor a = Tensor::Full({n, n}, 1.f, from);
    Tensor b = Tensor::Full({n, n}, 1.f, from);
    Tensor c = Tensor::Full({n, n}, -1.f, from);
    Tensor out = Tensor::Full({n, n}, -2.f, to);
    producer.Synchronize();
    receiver.Synchronize();
    // 40 GEMMs of n^3 (n = 4096: ~5.5 TFLOP, ~0.1 s at 51 TFLOP/s): c = n
    // everywhere, exactly (sums of ones, exact in fp32 for n up to 2^24).
    const Lane src_lane = producer.main_lane(), dst_lane = receiver.main_lane();
    for (int i = 0; i < 40; ++i) ops::Gemm(src_lane, a, false, b, false, c);
    std::unique_ptr<LaneEvent> ready = producer.NewEvent(/*timing=*/false);
    producer.Record(*ready, src_lane);
    const bool finished_before_wait = ready->Query();
    receiver.Wait(dst_lane, *ready);
    receiver.CopyFromPeer(dst_lane, out.data(), from, c.data(), n * n * sizeof(float));
    const std::vector<float> host = out.ToVector();  // waits for dst's main lane only
    const int64_t wrong = std::count_if(host.begin(), host.end(),
                                        [&](float v) { return v != static_cast<float>(n); });
    std::cout << "cuda:" << dst << " waited on an event of cuda:" << src
              << (finished_before_wait ? " (already complete when waited on)"
                                       : " (still pending when waited on)")
              << ": " << wrong << " of " << host.size() << " values wrong\n";
    EXPECT_EQ(wrong, 0) << "cuda:" << dst << " read cuda:" << src
                        << "'s buffer before the event's work finished";
    EXPECT_FALSE(finished_before_wait)
        << "the GEMMs finished before the wait was queued, so this run proves "
           "nothing about ordering: make the chain longer";
  }
}

TEST(PipelineGpuTest, TwoGpusEqualSingleDeviceTraining) {
  REQUIRE_GPUS(2);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  for (int micro : {1, 2, 4, 5}) {
    const GpuRun run = TrainOnDevices(setup, 2, micro, {Device::Cuda(0), Device::Cuda(1)});
    const double diff = MaxRelativeDifference(run.params[0], reference);
    std::cout << "cuda:0 | cuda:1, micro_batches=" << micro
              << ": max relative difference to single-device (CPU) " << diff
              << "; host waits in steps 2.." << setup.steps << ": "
              << run.host_waits_in_steps << "\n";
    EXPECT_LE(diff, kTolerance) << "micro=" << micro;
    // No host synchronisation between (or inside) stages: only the loss
    // read after the steps may wait.
    EXPECT_EQ(run.host_waits_in_steps, 0) << "micro=" << micro;
  }
}

TEST(PipelineGpuTest, ThreeStagesOverTwoGpusEqualSingleDevice) {
  REQUIRE_GPUS(2);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  const GpuRun run =
      TrainOnDevices(setup, 3, 4, {Device::Cuda(0), Device::Cuda(1), Device::Cuda(0)});
  EXPECT_LE(MaxRelativeDifference(run.params[0], reference), kTolerance);
  EXPECT_EQ(run.host_waits_in_steps, 0);
}

TEST(PipelineGpuTest, StagesSharingOneGpu) {
  REQUIRE_GPUS(1);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  const GpuRun run = TrainOnDevices(setup, 2, 4, {Device::Cuda(0), Device::Cuda(0)});
  EXPECT_LE(MaxRelativeDifference(run.params[0], reference), kTolerance);
  EXPECT_EQ(run.host_waits_in_steps, 0);
}

// Stage replicas all-reduce through device communicators (one GPU per
// replica of a stage).
TEST(PipelineGpuTest, ReplicasAllReduceThroughDeviceCommunicators) {
  REQUIRE_GPUS(2);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  const GpuRun run = TrainOnDevices(setup, 1, 2, {Device::Cuda(0), Device::Cuda(1)});
  EXPECT_LE(MaxRelativeDifference(run.params[0], reference), kTolerance);
  EXPECT_EQ(run.params[1], run.params[0]) << "replica 1 diverged from replica 0";
}

// Two stages times two replicas: on four GPUs one device each; on two GPUs
// each replica's stages share its GPU, and each stage's replicas still
// all-reduce across the two GPUs (one device group per stage).
TEST(PipelineGpuTest, TwoStagesTimesTwoReplicas) {
  REQUIRE_GPUS(2);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  const std::vector<Device> devices =
      CudaDeviceCount() >= 4
          ? std::vector<Device>{Device::Cuda(0), Device::Cuda(1), Device::Cuda(2), Device::Cuda(3)}
          : std::vector<Device>{Device::Cuda(0), Device::Cuda(0), Device::Cuda(1), Device::Cuda(1)};
  const GpuRun run = TrainOnDevices(setup, 2, 2, devices);
  EXPECT_LE(MaxRelativeDifference(run.params[0], reference), kTolerance);
  EXPECT_EQ(run.params[1], run.params[0]) << "replica 1 diverged from replica 0";
}

// A CPU stage beside a GPU stage: hand-offs cross device kinds through
// Tensor::To (with host waits, which this placement accepts) and train the
// same model.
TEST(PipelineGpuTest, CpuStageBesideGpuStage) {
  REQUIRE_GPUS(1);
  TrainSetup setup;
  const std::vector<float> reference = TrainReference(setup);
  for (const std::vector<Device>& devices :
       {std::vector<Device>{Device::Cpu(), Device::Cuda(0)},
        std::vector<Device>{Device::Cuda(0), Device::Cpu()}}) {
    const GpuRun run = TrainOnDevices(setup, 2, 3, devices);
    EXPECT_LE(MaxRelativeDifference(run.params[0], reference), kTolerance)
        << devices[0] << " | " << devices[1];
  }
}

// Busy time on a GPU comes from timing events on each stage's main lane:
// positive, and no more than the step's wall time up to the device being
// idle again (the two stages share cuda:0's main lane, so each stage's
// intervals may include work the other queued between its events, but
// never more than the step).
TEST(PipelineGpuTest, RecordsBusyTimeWithDeviceEvents) {
  REQUIRE_GPUS(1);
  TrainSetup setup;
  setup.sizes = {512, 2048, 2048, 2048, 10};
  setup.batch = 1024;
  PipelineOptions options;
  options.micro_batches = 4;
  options.devices = {Device::Cuda(0), Device::Cuda(0)};
  options.optimizer = Config();
  options.record_timing = true;
  Pipeline pipeline(MakeModel(setup, 1), options);
  auto [x, y] = Batch(setup, 0);
  x = x.To(Device::Cuda(0));
  y = y.To(Device::Cuda(0));
  pipeline.Step(x, y);  // warm-up: cuBLAS plans, allocator blocks
  GetBackend(Device::Cuda(0)).Synchronize();
  const auto start = std::chrono::steady_clock::now();
  pipeline.Step(x, y);
  GetBackend(Device::Cuda(0)).Synchronize();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> busy = pipeline.LastBusySeconds();
  ASSERT_EQ(busy.size(), 2u);
  std::cout << "busy " << busy[0] << " s, " << busy[1] << " s of " << wall << " s\n";
  for (double b : busy) {
    EXPECT_GT(b, 0.0);
    EXPECT_LE(b, wall);
  }
}

// Runs without a GPU, so the suite never passes on skips alone.
TEST(PipelineGpuTest, NamesAMissingGpu) {
  const int visible = CudaDeviceCount();
  TrainSetup setup;
  PipelineOptions options;
  options.devices = {Device::Cpu(), Device::Cuda(visible)};
  try {
    Pipeline pipeline(MakeModel(setup, 1), options);
    ADD_FAILURE() << "a pipeline on cuda:" << visible << " did not throw";
  } catch (const Error& e) {
    const std::string expected = "stage 1 of replica 0 is on cuda:" + std::to_string(visible) +
                                 " but " + std::to_string(visible) + " CUDA device(s) are visible";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
