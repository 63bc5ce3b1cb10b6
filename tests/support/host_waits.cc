#include "tests/support/host_waits.h"

#include "core/backend_registry.h"
#include "core/cuda/host_wait.h"
#include "core/rng.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/reducer.h"

namespace tandem {
namespace testing {

int64_t HostWaitsDuringSteps(Device device, int rank, Communicator& gradient_comm,
                             Communicator& host_comm, int steps) {
  Rng rng(3);
  MlpOptions mlp;
  mlp.device = device;
  auto model = Mlp({256, 512, 512, 10}, Activation::kRelu, rng, mlp);
  ReducerOptions reducer_options;
  reducer_options.bucket_bytes = 256 << 10;  // several buckets
  Reducer reducer(*model, gradient_comm, reducer_options);
  SgdParams sgd;
  Sgd optimizer(model->Parameters(), sgd);
  SoftmaxCrossEntropyLoss loss;
  Tensor x = Tensor::Full({64, 256}, 0.1f * (rank + 1), device);
  Tensor y = Tensor::Zeros({64}, device);
  auto step = [&] {
    optimizer.ZeroGrad();
    loss.Forward(model->Forward(x), y, 64 * gradient_comm.size());
    reducer.Backward(loss.Backward());
    optimizer.Step();
  };
  step();  // warm-up: allocations, cuBLAS handles
  host_comm.Barrier()->Wait();
  const int64_t before = cuda::HostWaitCount();
  for (int i = 0; i < steps; ++i) step();
  host_comm.Barrier()->Wait();
  const int64_t waits = cuda::HostWaitCount() - before;
  // Nobody synchronises until every worker has read the counter.
  host_comm.Barrier()->Wait();
  GetBackend(device).Synchronize();
  return waits;
}

}  // namespace testing
}  // namespace tandem
