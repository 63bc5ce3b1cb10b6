#include "io/checkpoint.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace {

// Everything of a model and an optimizer that a checkpoint holds.
struct Targets {
  struct Slot {
    std::string name;
    Tensor* tensor;
    const char* owner;  // "model" or "optimizer"
  };
  std::vector<Slot> tensors;
  std::vector<StateWord> state;  // the model's (Layer::State)
};

// `optimizer_state`: optimizer.State(), or the whole state of a sharded
// optimizer, given.
Targets FindTargets(Layer& model, Optimizer& optimizer,
                    const std::vector<std::pair<std::string, Tensor*>>& optimizer_state) {
  Targets targets;
  std::set<std::string> names;
  auto add = [&](const std::string& name, Tensor* tensor, const char* owner) {
    TANDEM_CHECK(names.insert(name).second)
        << "checkpoint: two tensors of model '" << model.Name()
        << "' and optimizer '" << optimizer.Name() << "' are named '" << name
        << "'; names key checkpoints and must be unique";
    targets.tensors.push_back({name, tensor, owner});
  };
  for (NamedParameter& p : model.Parameters()) add(p.name, &p.value(), "model");
  for (const auto& [name, tensor] : optimizer_state) add(name, tensor, "optimizer");
  targets.state = model.State();
  std::set<std::string> state_names;
  for (const StateWord& w : targets.state) {
    TANDEM_CHECK(state_names.insert(w.name).second)
        << "checkpoint: model '" << model.Name() << "' has two state words named '" << w.name
        << "'; names key checkpoints and must be unique";
  }
  return targets;
}

// What Restore will change, and every problem that stops it. Built in full
// before anything is changed (see Restore).
struct RestorePlan {
  std::vector<std::pair<Tensor*, const NamedTensor*>> copies;
  std::vector<std::pair<uint64_t*, uint64_t>> words;
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

// Each state word of the model needs its saved value; a saved state word
// the model lacks is a problem too. A checkpoint of a build that kept only
// Dropout offsets, under "dropout.<layer>.offset", restores them.
void PlanStateWords(const CheckpointState& state, const Targets& targets, RestorePlan& plan) {
  std::set<std::string> used;
  for (const StateWord& w : targets.state) {
    auto it = state.extra_u64.find(StateWordKey(w.name));
    if (it == state.extra_u64.end()) it = state.extra_u64.find("dropout." + w.name);
    if (it == state.extra_u64.end() || it->second.size() != 1) {
      plan.problems.push_back("checkpoint has no state word '" + w.name + "' (key '" +
                              StateWordKey(w.name) + "')");
      continue;
    }
    used.insert(it->first);
    plan.words.emplace_back(w.value, it->second[0]);
  }
  auto ends_with = [](const std::string& text, const std::string& end) {
    return text.size() >= end.size() &&
           text.compare(text.size() - end.size(), end.size(), end) == 0;
  };
  for (const auto& entry : state.extra_u64) {
    const std::string& key = entry.first;
    const bool is_state = key.rfind(kStateWordPrefix, 0) == 0 ||
                          (key.rfind("dropout.", 0) == 0 && ends_with(key, ".offset"));
    if (is_state && used.count(key) == 0) {
      plan.problems.push_back("checkpoint has '" + key + "' but the model has no such state word");
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

// A sharded optimizer's State() holds this worker's blocks only, under names
// no checkpoint of another worker count has.
void CheckWhole(const Optimizer& optimizer, const char* what) {
  TANDEM_CHECK(!optimizer.sharded())
      << what << ": optimizer '" << optimizer.Name()
      << "' keeps sharded state (--shard_optimizer), this worker's blocks only: pass its "
         "whole state explicitly (ShardedOptimizerHook::GatherState to capture; "
         "UnshardedStateShapes to restore, then ShardedOptimizerHook::LoadState)";
}

CheckpointState CaptureTargets(const Targets& targets, const Optimizer& optimizer,
                               const TrainingProgress& progress) {
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
  for (const StateWord& w : targets.state) state.extra_u64[StateWordKey(w.name)] = {*w.value};
  return state;
}

void RestoreTargets(const CheckpointState& state, const Targets& targets, Layer& model,
                    Optimizer& optimizer) {
  // Phase 1: check everything, collecting every problem.
  RestorePlan plan;
  PlanTensorCopies(state, targets, optimizer, plan);
  PlanStateWords(state, targets, plan);
  if (state.step < 0) {
    plan.problems.push_back("checkpoint step is " + std::to_string(state.step));
  }
  TANDEM_CHECK(plan.problems.empty())
      << DescribeProblems(plan.problems, model, optimizer);

  // Phase 2: apply. Nothing here can fail on a valid state.
  for (auto& [tensor, t] : plan.copies) {
    tensor->CopyFrom(Tensor::FromVector(t->data, t->shape));
  }
  for (auto& [word, value] : plan.words) *word = value;
  optimizer.set_steps(state.step);
  // Checkpoints keep float32 masters, whatever the precision that saved them:
  // a mixed-precision model computes with copies made from them.
  SyncWorkingCopies(model);
}

}  // namespace

std::string StateWordKey(const std::string& name) { return kStateWordPrefix + name; }

CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const TrainingProgress& progress) {
  CheckWhole(optimizer, "Capture");
  return CaptureTargets(FindTargets(model, optimizer, optimizer.State()), optimizer, progress);
}

CheckpointState Capture(Layer& model, Optimizer& optimizer,
                        const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                        const TrainingProgress& progress) {
  // Handles: the copies share the given tensors' data, which is only read.
  std::map<std::string, Tensor> given;
  for (const auto& [name, tensor] : optimizer_state) {
    TANDEM_CHECK(given.emplace(name, tensor).second)
        << "Capture: the optimizer state given has two tensors named '" << name << "'";
  }
  // In the unsharded optimizer's order, whatever order they came in.
  std::vector<std::pair<std::string, Tensor*>> slots;
  for (const auto& [name, shape] : UnshardedStateShapes(optimizer)) {
    auto it = given.find(name);
    TANDEM_CHECK(it != given.end() && it->second.shape() == shape)
        << "Capture: the optimizer state given has no '" << name << "' " << ShapeToString(shape)
        << " (optimizer " << optimizer.Name() << "'s)";
    slots.push_back({name, &it->second});
  }
  for (const auto& [name, tensor] : given) {
    const bool named = std::any_of(slots.begin(), slots.end(),
                                   [&name = name](const auto& slot) { return slot.first == name; });
    TANDEM_CHECK(named) << "Capture: the optimizer state given has '" << name
                        << "', which optimizer " << optimizer.Name() << " does not name";
  }
  return CaptureTargets(FindTargets(model, optimizer, slots), optimizer, progress);
}

void Restore(const CheckpointState& state, Layer& model, Optimizer& optimizer) {
  CheckWhole(optimizer, "Restore");
  RestoreTargets(state, FindTargets(model, optimizer, optimizer.State()), model, optimizer);
}

std::vector<std::pair<std::string, Tensor>> Restore(
    const CheckpointState& state, Layer& model, Optimizer& optimizer,
    const std::vector<std::pair<std::string, Shape>>& optimizer_state) {
  // Host tensors of the given shapes receive the checkpoint's values, as
  // the optimizer's own would.
  std::vector<std::pair<std::string, Tensor>> loaded;
  loaded.reserve(optimizer_state.size());
  for (const auto& [name, shape] : optimizer_state) loaded.push_back({name, Tensor::Empty(shape)});
  std::vector<std::pair<std::string, Tensor*>> slots;
  for (auto& [name, tensor] : loaded) slots.push_back({name, &tensor});
  RestoreTargets(state, FindTargets(model, optimizer, slots), model, optimizer);
  return loaded;
}

std::vector<std::pair<std::string, Shape>> UnshardedStateShapes(Optimizer& optimizer) {
  std::vector<std::pair<std::string, Shape>> shapes;
  if (!optimizer.sharded()) {
    for (const auto& [name, tensor] : optimizer.State()) shapes.push_back({name, tensor->shape()});
    return shapes;
  }
  // The suffixes of the first shard's state (".adam_m", ".adam_v"), in order.
  std::vector<std::string> suffixes;
  if (!optimizer.shards().empty()) {
    const std::string prefix = optimizer.shards()[0].name + ".";
    for (const auto& [name, tensor] : optimizer.State()) {
      if (name.compare(0, prefix.size(), prefix) == 0) {
        suffixes.push_back(name.substr(prefix.size() - 1));
      }
    }
  }
  for (const NamedParameter& p : optimizer.parameters()) {
    for (const std::string& suffix : suffixes) shapes.push_back({p.name + suffix, p.value().shape()});
  }
  return shapes;
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
