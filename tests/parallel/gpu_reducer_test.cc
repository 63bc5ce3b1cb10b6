// Data parallelism on GPUs through NCCL (threads mode): 2 GPUs equal 1 GPU on
// the global batch, replicas stay bitwise identical after every step, and a
// step never makes the host wait for the GPU. Skips, saying why, with fewer
// than 2 GPUs.
#include <gtest/gtest.h>

#include <mutex>

#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/launcher.h"
#include "parallel/reducer.h"
#include "tests/support/dp_training.h"

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
                                        std::vector<std::vector<std::vector<float>>>* steps) {
  LaunchOptions options;
  options.workers = workers;
  options.device = "cuda";
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
    params[w.rank] = testing::TrainDataParallel(w.gradient_comm(), mine);
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

TEST_F(GpuReducerTest, StepNeverWaitsOnTheHost) {
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
    SgdParams sgd;
    Sgd optimizer(model->Parameters(), sgd);
    SoftmaxCrossEntropyLoss loss;
    Tensor x = Tensor::Full({64, 256}, 0.1f * (w.rank + 1), w.device);
    Tensor y = Tensor::Zeros({64}, w.device);
    auto step = [&] {
      optimizer.ZeroGrad();
      loss.Forward(model->Forward(x), y, 128);
      reducer.Backward(loss.Backward());
      optimizer.Step();
    };
    step();  // warm-up: allocations, cuBLAS handles
    w.comm.Barrier();
    const int64_t before = cuda::HostWaitCount();
    for (int i = 0; i < 5; ++i) step();
    // The counter is process-wide: both workers' steps are in this window.
    w.comm.Barrier();
    waits[w.rank] = cuda::HostWaitCount() - before;
    // Nobody synchronises until every worker has read the counter.
    w.comm.Barrier();
    GetBackend(w.device).Synchronize();
  });
  std::cout << "host waits during 5 steps on 2 GPUs: " << waits[0] << ", " << waits[1] << "\n";
  EXPECT_EQ(waits[0], 0);
  EXPECT_EQ(waits[1], 0);
}

}  // namespace
}  // namespace tandem
