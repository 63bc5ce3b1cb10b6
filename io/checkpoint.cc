#include "io/checkpoint.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "layers/dropout.h"
#include "layers/sequential.h"

namespace tandem {
namespace {

void CollectDropouts(Layer& layer, std::vector<Dropout*>& out) {
  if (auto* dropout = dynamic_cast<Dropout*>(&layer)) {
    out.push_back(dropout);
    return;
  }
  if (auto* sequential = dynamic_cast<Sequential*>(&layer)) {
    for (size_t i = 0; i < sequential->size(); ++i) {
      CollectDropouts(sequential->layer(i), out);
    }
  }
}

// Everything of a model and an optimizer that a checkpoint holds.
struct Targets {
  struct Slot {
    std::string name;
    Tensor* tensor;
    const char* owner;  // "model" or "optimizer"
  };
  std::vector<Slot> tensors;
  std::vector<Dropout*> dropouts;
};

Targets FindTargets(Layer& model, Optimizer& optimizer) {
  Targets targets;
  std::set<std::string> names;
  auto add = [&](const std::string& name, Tensor* tensor, const char* owner) {
    TANDEM_CHECK(names.insert(name).second)
        << "checkpoint: two tensors of model '" << model.Name()
        << "' and optimizer '" << optimizer.Name() << "' are named '" << name
        << "'; names key checkpoints and must be unique";
    targets.tensors.push_back({name, tensor, owner});
  };
  for (Parameter& p : model.Parameters()) add(p.name, p.value, "model");
  for (auto& [name, tensor] : optimizer.State()) add(name, tensor, "optimizer");
  CollectDropouts(model, targets.dropouts);
  std::set<std::string> dropout_names;
  for (Dropout* d : targets.dropouts) {
    TANDEM_CHECK(dropout_names.insert(d->Name()).second)
        << "checkpoint: model '" << model.Name()
        << "' has two dropout layers named '" << d->Name() << "'";
  }
  return targets;
}

// What Restore will change, and every problem that stops it. Built in full
// before anything is changed (see Restore).
struct RestorePlan {
  std::vector<std::pair<Tensor*, const NamedTensor*>> copies;
  std::vector<std::pair<Dropout*, uint64_t>> offsets;
  std::vector<std::string> problems;
};

// The checkpoint's tensors by name; duplicates and shapes that do not match
// their data are problems.
std::map<std::string, const NamedTensor*> IndexSaved(
    const CheckpointState& state, RestorePlan& plan) {
  std::map<std::string, const NamedTensor*> saved;
  for (const NamedTensor& t : state.tensors) {
    if (!saved.emplace(t.name, &t).second) {
      plan.problems.push_back("checkpoint has two tensors named '" + t.name +
                              "'");
    } else if (uint64_t count = 0;
               !internal::CheckpointElementCount(t.shape, &count) ||
               count != t.data.size()) {
      plan.problems.push_back("checkpoint tensor '" + t.name + "' has shape " +
                              ShapeToString(t.shape) + " but " +
                              std::to_string(t.data.size()) + " values");
    }
  }
  return saved;
}

// Pairs each model and optimizer tensor with its saved value: a missing or
// differently shaped one is a problem, and so is a saved tensor that pairs
// with nothing.
void PlanTensorCopies(const CheckpointState& state, const Targets& targets,
                      const Optimizer& optimizer, RestorePlan& plan) {
  const std::map<std::string, const NamedTensor*> saved =
      IndexSaved(state, plan);
  std::set<std::string> used;
  for (const Targets::Slot& slot : targets.tensors) {
    const std::string owner = slot.owner == std::string("model")
                                  ? "the model's"
                                  : "optimizer " + optimizer.Name() + "'s";
    auto it = saved.find(slot.name);
    if (it == saved.end()) {
      plan.problems.push_back("checkpoint has no tensor '" + slot.name +
                              "' (" + owner + " is " +
                              ShapeToString(slot.tensor->shape()) + ")");
      continue;
    }
    used.insert(slot.name);
    if (it->second->shape != slot.tensor->shape()) {
      plan.problems.push_back("checkpoint tensor '" + slot.name + "' is " +
                              ShapeToString(it->second->shape) + " but " +
                              owner + " is " +
                              ShapeToString(slot.tensor->shape()));
      continue;
    }
    plan.copies.emplace_back(slot.tensor, it->second);
  }
  for (const NamedTensor& t : state.tensors) {
    if (used.count(t.name) == 0) {
      plan.problems.push_back("checkpoint tensor '" + t.name + "' " +
                              ShapeToString(t.shape) +
                              " matches nothing in the model or the optimizer");
    }
  }
}

// Each Dropout layer needs its one-word offset; a saved dropout offset whose
// layer the model lacks is a problem too.
void PlanDropoutOffsets(const CheckpointState& state, const Targets& targets,
                        RestorePlan& plan) {
  std::set<std::string> dropout_keys;
  for (Dropout* d : targets.dropouts) {
    const std::string key = DropoutOffsetKey(d->Name());
    dropout_keys.insert(key);
    auto it = state.extra_u64.find(key);
    if (it == state.extra_u64.end() || it->second.size() != 1) {
      plan.problems.push_back("checkpoint has no offset for dropout layer '" +
                              d->Name() + "' (key '" + key + "')");
      continue;
    }
    plan.offsets.emplace_back(d, it->second[0]);
  }
  for (const auto& entry : state.extra_u64) {
    const std::string& key = entry.first;
    const bool is_dropout = key.rfind("dropout.", 0) == 0 &&
                            key.size() >= 7 &&
                            key.compare(key.size() - 7, 7, ".offset") == 0;
    if (is_dropout && dropout_keys.count(key) == 0) {
      plan.problems.push_back("checkpoint has '" + key +
                              "' but the model has no such dropout layer");
    }
  }
}

// The first three problems, how many more there are, and a likely cause.
std::string DescribeProblems(const std::vector<std::string>& problems,
                             const Layer& model, const Optimizer& optimizer) {
  std::ostringstream message;
  message << "checkpoint does not fit model '" << model.Name()
          << "' with optimizer '" << optimizer.Name()
          << "'; nothing was restored: ";
  const size_t shown = std::min<size_t>(problems.size(), 3);
  for (size_t i = 0; i < shown; ++i) message << (i ? "; " : "") << problems[i];
  if (problems.size() > shown) {
    message << " (and " << problems.size() - shown << " more)";
  }
  message << ". Was it saved with other --hidden or --optimizer flags?";
  return message.str();
}

}  // namespace

std::string DropoutOffsetKey(const std::string& layer_name) {
  return "dropout." + layer_name + ".offset";
}

CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const TrainingProgress& progress) {
  const Targets targets = FindTargets(model, optimizer);
  CheckpointState state;
  state.step = optimizer.steps();
  state.epoch = progress.epoch;
  state.batch_in_epoch = progress.batch_in_epoch;
  state.seed = progress.seed;
  state.rng_words = progress.rng_words;
  for (const Targets::Slot& slot : targets.tensors) {
    state.tensors.push_back(
        {slot.name, slot.tensor->shape(), slot.tensor->ToVector()});
  }
  for (Dropout* d : targets.dropouts) {
    state.extra_u64[DropoutOffsetKey(d->Name())] = {d->offset()};
  }
  return state;
}

void Restore(const CheckpointState& state, Layer& model, Optimizer& optimizer) {
  const Targets targets = FindTargets(model, optimizer);

  // Phase 1: check everything, collecting every problem.
  RestorePlan plan;
  PlanTensorCopies(state, targets, optimizer, plan);
  PlanDropoutOffsets(state, targets, plan);
  if (state.step < 0) {
    plan.problems.push_back("checkpoint step is " + std::to_string(state.step));
  }
  TANDEM_CHECK(plan.problems.empty())
      << DescribeProblems(plan.problems, model, optimizer);

  // Phase 2: apply. Nothing here can fail on a valid state.
  for (auto& [tensor, t] : plan.copies) {
    tensor->CopyFrom(Tensor::FromVector(t->data, t->shape));
  }
  for (auto& [dropout, offset] : plan.offsets) dropout->set_offset(offset);
  optimizer.set_steps(state.step);
  // Checkpoints keep float32 masters, whatever the precision that saved them:
  // a mixed-precision model computes with copies made from them.
  SyncWorkingCopies(model);
}

std::vector<uint64_t> RngWords(const Rng& rng) {
  const Rng::State s = rng.state();
  return std::vector<uint64_t>(s.begin(), s.end());
}

Rng RestoreRng(const CheckpointState& state) {
  Rng::State s;
  TANDEM_CHECK(state.rng_words.size() == s.size())
      << "checkpoint holds " << state.rng_words.size()
      << " RNG words, expected " << s.size()
      << " (was it captured without TrainingProgress::rng_words?)";
  std::copy(state.rng_words.begin(), state.rng_words.end(), s.begin());
  Rng rng(state.seed);
  rng.set_state(s);
  return rng;
}

}  // namespace tandem
