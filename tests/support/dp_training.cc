#include "tests/support/dp_training.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/reducer.h"
#include "parallel/sharding.h"

namespace tandem {
namespace testing {

namespace {
std::vector<float> Flatten(Layer& model) {
  std::vector<float> params;
  for (NamedParameter& p : model.Parameters()) {
    const std::vector<float> v = p.value().ToVector();
    params.insert(params.end(), v.begin(), v.end());
  }
  return params;
}
}  // namespace

std::vector<float> TrainDataParallel(Communicator& comm, const DpSetup& setup) {
  return TrainDataParallel(std::vector<Communicator*>{&comm}, setup);
}

std::vector<float> TrainDataParallel(const std::vector<Communicator*>& lanes,
                                     const DpSetup& setup) {
  Communicator& comm = *lanes.at(0);
  // Rank-dependent init on purpose: the reducer must broadcast rank 0's.
  Rng init(100 + comm.rank());
  MlpOptions mlp;
  mlp.device = setup.device;
  mlp.precision = setup.precision;
  auto model = Mlp({6, 8, 5, 3}, Activation::kTanh, init, mlp);
  ReducerOptions options;
  options.bucket_bytes = setup.bucket_bytes;
  options.overlap = setup.overlap;
  Reducer reducer(*model, lanes, options);
  OptimizerConfig config;
  config.name = setup.optimizer;
  config.lr = 0.05f;
  config.momentum = 0.9f;
  auto optimizer = MakeOptimizer(config, model->Parameters());
  std::unique_ptr<CommHook> reduce;
  if (setup.bf16_allreduce) reduce = std::make_unique<BFloat16CompressionHook>();
  if (setup.per_bucket_update) {
    reducer.RegisterCommHook(std::make_unique<OptimizerUpdateHook>(*optimizer, std::move(reduce)));
  } else if (reduce != nullptr) {
    reducer.RegisterCommHook(std::move(reduce));
  }
  SoftmaxCrossEntropyLoss loss;

  const int64_t micro_batch = setup.batch;
  const int64_t global = micro_batch * setup.micro_steps;
  for (int step = 0; step < setup.steps; ++step) {
    optimizer->ZeroGrad();
    for (int micro = 0; micro < setup.micro_steps; ++micro) {
      // The same global micro-batch on every rank, from (step, micro).
      Rng data(1000 * step + micro);
      std::vector<float> x(micro_batch * 6), y(micro_batch);
      for (float& v : x) v = data.Normal();
      for (float& v : y) v = static_cast<float>(data.UniformInt(3));
      const ShardRange shard = Shard(micro_batch, comm.rank(), comm.size());
      Tensor xs = Tensor::FromVector(
          std::vector<float>(x.begin() + shard.begin * 6, x.begin() + shard.end * 6),
          {shard.size(), 6}, setup.device);
      Tensor ys = Tensor::FromVector(
          std::vector<float>(y.begin() + shard.begin, y.begin() + shard.end),
          {shard.size()}, setup.device);
      loss.Forward(model->Forward(xs), ys, global);
      const bool sync = micro + 1 == setup.micro_steps;
      if (setup.per_bucket_update && sync) {
        // The update, and the step's count, happen inside Backward.
        const std::vector<float> before = Flatten(*model);
        reducer.Backward(loss.Backward());
        TANDEM_CHECK(Flatten(*model) != before)
            << "per-bucket update: Backward left the parameters as they were";
        TANDEM_CHECK(optimizer->steps() == step + 1)
            << "per-bucket update: the hook counted " << optimizer->steps() << " steps after "
            << step + 1;
      } else {
        reducer.Backward(loss.Backward(),
                         sync ? GradientSync::kReduce : GradientSync::kAccumulateLocally);
      }
    }
    if (!setup.per_bucket_update) optimizer->Step();
    if (setup.on_step) setup.on_step(step, Flatten(*model));
  }
  return Flatten(*model);
}

double MaxRelativeDifference(const std::vector<float>& a,
                             const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) /
                                std::max(std::abs(double(b[i])), 1e-3));
  }
  return worst;
}

}  // namespace testing
}  // namespace tandem
