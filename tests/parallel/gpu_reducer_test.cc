// Data parallelism on GPUs through NCCL (threads mode): 2 GPUs equal 1 GPU on
// the global batch, replicas stay bitwise identical after every step, and a
// step never makes the host wait for the GPU; the same with gradients
// all-reduced as bfloat16. Skips, saying why, with fewer than 2 GPUs.
#include <gtest/gtest.h>

#include <mutex>

#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/rng.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/comm_hook.h"
#include "parallel/launcher.h"
#include "parallel/reducer.h"
#include "tests/support/dp_training.h"
#include "tests/support/host_waits.h"

namespace tandem {
namespace {

using testing::DpSetup;

class GpuReducerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() < 2) {
      GTEST_SKIP() << "needs 2 GPUs, found " << CudaDeviceCount() << ": "
                   << CudaUnavailableReason();
    }
  }
};

std::vector<std::vector<float>> RunGpus(int workers, DpSetup setup,
                                        std::vector<std::vector<std::vector<float>>>* steps,
                                        int comms = 1) {
  LaunchOptions options;
  options.workers = workers;
  options.device = "cuda";
  options.gradient_comms = comms;
  std::vector<std::vector<float>> params(workers);
  std::mutex mutex;
  Launch(options, [&](Worker& w) {
    DpSetup mine = setup;
    mine.device = w.device;
    if (steps != nullptr) {
      mine.on_step = [&, rank = w.rank](int step, const std::vector<float>& p) {
        std::lock_guard<std::mutex> lock(mutex);
        (*steps)[rank].push_back(p);
      };
    }
    params[w.rank] = testing::TrainDataParallel(w.gradient_comms(), mine);
  });
  return params;
}

TEST_F(GpuReducerTest, TwoGpusEqualOneGpuAndReplicasStayIdentical) {
  for (bool overlap : {true, false}) {
    DpSetup setup;
    setup.overlap = overlap;
    setup.steps = 5;
    const std::vector<float> reference = RunGpus(1, setup, nullptr)[0];
    std::vector<std::vector<std::vector<float>>> steps(2);
    const auto params = RunGpus(2, setup, &steps);
    const double diff = testing::MaxRelativeDifference(params[0], reference);
    std::cout << (overlap ? "overlap" : "no overlap")
              << ": 2 GPUs vs 1 GPU, max relative difference " << diff << "\n";
    EXPECT_LE(diff, 1e-5);
    ASSERT_EQ(steps[0].size(), 5u);
    for (size_t s = 0; s < steps[0].size(); ++s) {
      EXPECT_EQ(steps[0][s], steps[1][s]) << "replicas differ after step " << s;
    }
  }
}

// One GPU, one worker: the reducer reduces nothing, and the per-bucket
// update hook updates each bucket on its own lane beside backward: bitwise
// what Step gives.
TEST(OneGpuReducerTest, PerBucketUpdateEqualsStepBitwise) {
  if (CudaDeviceCount() < 1) GTEST_SKIP() << "no GPU: " << CudaUnavailableReason();
  for (const char* optimizer : {"sgd", "adamw"}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
      DpSetup setup;
      setup.steps = 3;
      setup.optimizer = optimizer;
      // bf16: the gradients are views at unaligned offsets of the buckets,
      // which cuBLASLt's GEMMs must accept.
      setup.precision = precision;
      const auto stepped = RunGpus(1, setup, nullptr);
      setup.per_bucket_update = true;
      const auto per_bucket = RunGpus(1, setup, nullptr);
      EXPECT_EQ(per_bucket[0], stepped[0]) << optimizer << " " << PrecisionName(precision);
    }
  }
}

// Each bucket updated on its own lane as soon as it is reduced
// (OptimizerUpdateHook): bitwise what Step gives, replicas identical.
TEST_F(GpuReducerTest, PerBucketUpdateEqualsStepBitwise) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    DpSetup setup;
    setup.steps = 3;
    setup.optimizer = optimizer;
    const auto stepped = RunGpus(2, setup, nullptr);
    setup.per_bucket_update = true;
    std::vector<std::vector<std::vector<float>>> steps(2);
    const auto per_bucket = RunGpus(2, setup, &steps);
    EXPECT_EQ(per_bucket[0], stepped[0]) << optimizer;
    for (size_t s = 0; s < steps[0].size(); ++s) {
      EXPECT_EQ(steps[0][s], steps[1][s]) << optimizer << ": replicas differ after step " << s;
    }
  }
}

// Buckets spread over two NCCL communicators (Note [Communicators]): the same sums
// in the same order per bucket, so bitwise the result of one lane.
TEST_F(GpuReducerTest, TwoLanesEqualOneLaneBitwise) {
  DpSetup setup;
  setup.steps = 3;
  setup.per_bucket_update = true;
  const auto one = RunGpus(2, setup, nullptr, 1);
  std::vector<std::vector<std::vector<float>>> steps(2);
  const auto two = RunGpus(2, setup, &steps, 2);
  EXPECT_EQ(two[0], one[0]);
  for (size_t s = 0; s < steps[0].size(); ++s) {
    EXPECT_EQ(steps[0][s], steps[1][s]) << "replicas differ after step " << s;
  }
}

// Not under compute-sanitizer: the tool runs one kernel at a time per
// process, and here one process drives both GPUs, whose NCCL kernels wait for
// each other (the run deadlocks inside cuLaunchKernel). The MPI-mode copy of
// this test, one process per GPU, runs under the tool instead.
TEST_F(GpuReducerTest, StepNeverWaitsOnTheHost) {
  LaunchOptions options;
  options.workers = 2;
  options.device = "cuda";
  std::vector<int64_t> waits(2, -1);
  Launch(options, [&](Worker& w) {
    waits[w.rank] =
        testing::HostWaitsDuringSteps(w.device, w.rank, w.gradient_comm(), w.comm, 5);
  });
  std::cout << "host waits during 5 steps on 2 GPUs: " << waits[0] << ", " << waits[1] << "\n";
  EXPECT_EQ(waits[0], 0);
  EXPECT_EQ(waits[1], 0);
}

// Gradients all-reduced as bfloat16 (BFloat16CompressionHook, ncclBfloat16):
// replicas bitwise identical after every step; inside the per-bucket update
// hook, bitwise what Step gives; over two lanes, what one lane gives.
TEST_F(GpuReducerTest, BFloat16CompressionKeepsReplicasIdentical) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    DpSetup setup;
    setup.steps = 3;
    setup.optimizer = optimizer;
    const std::vector<float> plain = RunGpus(2, setup, nullptr)[0];
    setup.bf16_allreduce = true;
    std::vector<std::vector<std::vector<float>>> steps(2);
    const auto stepped = RunGpus(2, setup, &steps);
    for (size_t s = 0; s < steps[0].size(); ++s) {
      EXPECT_EQ(steps[0][s], steps[1][s]) << optimizer << ": replicas differ after step " << s;
    }
    EXPECT_NE(stepped[0], plain) << optimizer << ": nothing was rounded";
    std::cout << optimizer << ": bf16 all-reduce on 2 GPUs, max relative difference of the "
              << "parameters to float32 " << testing::MaxRelativeDifference(stepped[0], plain)
              << "\n";
    setup.per_bucket_update = true;
    EXPECT_EQ(RunGpus(2, setup, nullptr)[0], stepped[0]) << optimizer << ": per-bucket update";
    EXPECT_EQ(RunGpus(2, setup, nullptr, 2)[0], stepped[0]) << optimizer << ": two comms";
  }
}

// Compression and per-bucket updates queue everything: the casts on the
// hook's lanes, the all-reduce on NCCL's, the updates on the optimizer's,
// ordered by events. A step never makes the host wait.
TEST_F(GpuReducerTest, BFloat16CompressionStepNeverWaitsOnTheHost) {
  LaunchOptions options;
  options.workers = 2;
  options.device = "cuda";
  std::vector<int64_t> waits(2, -1);
  Launch(options, [&](Worker& w) {
    Rng rng(3);
    MlpOptions mlp;
    mlp.device = w.device;
    auto model = Mlp({256, 512, 512, 10}, Activation::kRelu, rng, mlp);
    ReducerOptions reducer_options;
    reducer_options.bucket_bytes = 256 << 10;  // several buckets
    Reducer reducer(*model, w.gradient_comm(), reducer_options);
    Sgd optimizer(model->Parameters(), SgdParams{});
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(
        optimizer, std::make_unique<BFloat16CompressionHook>()));
    SoftmaxCrossEntropyLoss loss;
    Tensor x = Tensor::Full({64, 256}, 0.1f * (w.rank + 1), w.device);
    Tensor y = Tensor::Zeros({64}, w.device);
    auto step = [&] {
      optimizer.ZeroGrad();
      loss.Forward(model->Forward(x), y, 64 * 2);
      reducer.Backward(loss.Backward());
    };
    step();  // warm-up: allocations, cuBLAS handles
    w.comm.Barrier()->Wait();
    const int64_t before = cuda::HostWaitCount();
    for (int i = 0; i < 5; ++i) step();
    w.comm.Barrier()->Wait();
    waits[w.rank] = cuda::HostWaitCount() - before;
    w.comm.Barrier()->Wait();  // nobody synchronises before both have counted
    GetBackend(w.device).Synchronize();
  });
  std::cout << "host waits during 5 compressed steps on 2 GPUs: " << waits[0] << ", "
            << waits[1] << "\n";
  EXPECT_EQ(waits[0], 0);
  EXPECT_EQ(waits[1], 0);
}

}  // namespace
}  // namespace tandem
