#include "tests/parallel/sharded_training.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"
#include "parallel/reducer.h"
#include "parallel/sharded_optimizer.h"
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

// Every working copy, widened; empty where the model keeps none.
std::vector<float> FlattenWorking(Layer& model) {
  std::vector<float> working;
  for (NamedParameter& p : model.Parameters()) {
    if (p.working() == nullptr || !p.working()->defined()) continue;
    const std::vector<float> v = p.working()->ToVector();
    working.insert(working.end(), v.begin(), v.end());
  }
  return working;
}

// The unsharded reference's clipping: the norm of the reduced gradient in
// double on the host, every gradient scaled by max * (1 / max(norm + 1e-6,
// max)), rounded as the hook rounds it.
float ClipByHand(Layer& model, float max_norm) {
  double squares = 0;
  for (NamedParameter& p : model.Parameters()) {
    for (float g : p.grad().ToVector()) squares += double(g) * g;
  }
  const float norm = static_cast<float>(std::sqrt(squares));
  const float factor = max_norm * (1.f / std::max(norm + 1e-6f, max_norm));
  for (NamedParameter& p : model.Parameters()) ops::Scale(p.grad(), factor);
  return norm;
}
}  // namespace

ShardRun TrainSharded(Communicator& comm, const ShardSetup& setup) {
  // Rank-dependent init on purpose: the reducer must broadcast rank 0's.
  Rng init(100 + comm.rank());
  MlpOptions mlp;
  mlp.precision = setup.precision;
  auto model = Mlp(setup.sizes, Activation::kTanh, init, mlp);
  ReducerOptions options;
  options.bucket_bytes = setup.bucket_bytes;
  options.overlap = setup.overlap;
  options.shard_optimizer = setup.shard;
  Reducer reducer(*model, comm, options);
  OptimizerConfig config;
  config.name = setup.optimizer;
  config.lr = 0.05f;
  config.momentum = 0.9f;
  config.weight_decay = setup.weight_decay;
  auto optimizer = MakeOptimizer(config, model->Parameters());
  ShardedOptimizerHook* hook = nullptr;
  if (setup.shard) {
    ShardedOptimizerOptions sharded;
    sharded.max_grad_norm = setup.clip;
    sharded.track_grad_norm = true;
    sharded.gather_during_forward = setup.gather_during_forward;
    auto owned = std::make_unique<ShardedOptimizerHook>(*optimizer, sharded);
    hook = owned.get();
    reducer.RegisterCommHook(std::move(owned));
  }
  SoftmaxCrossEntropyLoss loss;
  const int64_t in = setup.sizes.front(), classes = setup.sizes.back();

  ShardRun run;
  const int64_t micro_batch = setup.batch;
  const int64_t global = micro_batch * setup.micro_steps;
  for (int step = 0; step < setup.steps; ++step) {
    optimizer->ZeroGrad();
    for (int micro = 0; micro < setup.micro_steps; ++micro) {
      // The same global micro-batch on every rank, from (step, micro).
      Rng data(1000 * step + micro);
      std::vector<float> x(micro_batch * in), y(micro_batch);
      for (float& v : x) v = data.Normal();
      for (float& v : y) v = static_cast<float>(data.UniformInt(classes));
      const ShardRange shard = Shard(micro_batch, comm.rank(), comm.size());
      Tensor xs = Tensor::FromVector(
          std::vector<float>(x.begin() + shard.begin * in, x.begin() + shard.end * in),
          {shard.size(), in});
      Tensor ys = Tensor::FromVector(
          std::vector<float>(y.begin() + shard.begin, y.begin() + shard.end), {shard.size()});
      loss.Forward(reducer.Forward(xs), ys, global);
      const bool sync = micro + 1 == setup.micro_steps;
      reducer.Backward(loss.Backward(),
                       sync ? GradientSync::kReduce : GradientSync::kAccumulateLocally);
    }
    if (setup.shard) {
      TANDEM_CHECK(optimizer->steps() == step + 1)
          << "the sharded step counted " << optimizer->steps() << " steps after " << step + 1;
      run.last_norm = hook->last_grad_norm().Item();
    } else {
      run.last_norm = setup.clip > 0.f ? ClipByHand(*model, setup.clip) : 0.f;
      optimizer->Step();
    }
  }
  if (setup.shard) {
    reducer.WaitForParameters();  // the last step's gathers, with gather_during_forward
    run.params_before_gather = Flatten(*model);
    run.working = FlattenWorking(*model);
    hook->GatherMasters();
    const auto gathered = hook->GatherState();
    for (const auto& [name, tensor] : gathered) run.state.push_back({name, tensor.ToVector()});
    // Loading the whole state back restores this rank's shards exactly.
    std::vector<std::pair<std::string, Tensor>> copy;
    for (const auto& [name, values] : run.state) {
      copy.push_back({name, Tensor::FromVector(values, gathered[copy.size()].second.shape())});
    }
    for (auto& [name, tensor] : optimizer->State()) ops::Fill(*tensor, 0.f);
    hook->LoadState(copy);
    const auto again = hook->GatherState();
    TANDEM_CHECK(again.size() == run.state.size()) << "GatherState after LoadState";
    for (size_t i = 0; i < again.size(); ++i) {
      TANDEM_CHECK(again[i].first == run.state[i].first &&
                   again[i].second.ToVector() == run.state[i].second)
          << "LoadState(GatherState()) changed '" << run.state[i].first << "'";
    }
  } else {
    for (auto& [name, tensor] : optimizer->State()) run.state.push_back({name, tensor->ToVector()});
  }
  run.params = Flatten(*model);
  run.state_bytes = optimizer->state_bytes();
  for (int b = 0; b < reducer.num_buckets(); ++b) {
    run.bucket_elements.push_back(reducer.bucket_elements(b));
  }
  return run;
}

}  // namespace testing
}  // namespace tandem
