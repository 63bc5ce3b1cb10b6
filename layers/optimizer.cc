#include "layers/optimizer.h"

#include <cmath>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {
namespace {
void CheckLr(float lr) {
  TANDEM_CHECK(std::isfinite(lr) && lr >= 0.f)
      << "learning rate must be a non-negative number, got " << lr
      << " (--lr)";
}
}  // namespace

Optimizer::Optimizer(std::vector<Parameter> params) : params_(std::move(params)) {
  for (const Parameter& p : params_) {
    TANDEM_CHECK(p.value != nullptr && p.grad != nullptr && p.value->defined())
        << "optimizer got parameter '" << p.name << "' without value or grad";
    TANDEM_CHECK(p.value->shape() == p.grad->shape())
        << "parameter '" << p.name << "' is " << ShapeToString(p.value->shape())
        << " but its gradient is " << ShapeToString(p.grad->shape());
  }
}

void Optimizer::ZeroGrad() {
  if (fused_into_ != nullptr) return;  // no gradients are kept
  JoinParameterWork();
  for (Parameter& p : params_) ops::Fill(*p.grad, 0.f);
}

void Optimizer::JoinParameterWork() {
  // Layers may leave gradient work on the side lane (Linear); joining an
  // already joined lane is free, and models live on one device or a few.
  Device last = Device::Cpu();
  for (const Parameter& p : params_) {
    const Device d = p.value->device();
    if (d == last) continue;
    ops::JoinSideLane(d);
    last = d;
  }
}

Sgd::Sgd(std::vector<Parameter> params, SgdParams options)
    : Optimizer(std::move(params)), options_(options) {
  CheckLr(options.lr);
  TANDEM_CHECK(options.momentum >= 0.f && options.momentum < 1.f)
      << "SGD momentum must be in [0, 1), got " << options.momentum;
  TANDEM_CHECK(!options.nesterov || options.momentum > 0.f)
      << "Nesterov SGD needs momentum > 0";
  if (options.momentum > 0.f) {
    for (Parameter& p : params_) {
      velocity_.push_back(Tensor::Zeros(p.value->shape(), p.value->device()));
    }
  }
}

void Sgd::set_lr(float lr) {
  CheckLr(lr);
  options_.lr = lr;
  if (fused_into_ != nullptr) {
    TANDEM_CHECK(fused_into_->SetGradTarget(GradTarget::ApplySgd(lr)))
        << "model '" << fused_into_->Name()
        << "' no longer accepts SGD in backward";
  }
}

bool Sgd::FuseIntoBackward(Layer& model) {
  if (options_.momentum != 0.f || options_.weight_decay != 0.f) return false;
  if (!model.SetGradTarget(GradTarget::ApplySgd(options_.lr))) return false;
  fused_into_ = &model;
  return true;
}

void Sgd::Unfuse() {
  if (fused_into_ == nullptr) return;
  fused_into_->SetGradTarget(GradTarget::Accumulate());
  fused_into_ = nullptr;
  ZeroGrad();  // the gradients were not kept up to date meanwhile
}

void Optimizer::UpdateAllAndCount() {
  if (!updates_handed_off_) {
    JoinParameterWork();
    std::vector<size_t> all(params_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    UpdateParameters(all);
  }
  ++steps_;
}

void Sgd::Step() {
  if (fused_into_ != nullptr) {  // Backward has applied the update
    ++steps_;
    return;
  }
  UpdateAllAndCount();
}

void Sgd::UpdateParameters(const std::vector<size_t>& indices) {
  TANDEM_CHECK(fused_into_ == nullptr)
      << "SGD is fused into model '" << fused_into_->Name()
      << "' (Sgd::FuseIntoBackward): its Backward updates the parameters";
  for (size_t i : indices) {
    TANDEM_CHECK(i < params_.size()) << "parameter index " << i << " of " << params_.size();
    ops::SgdUpdate(options_, *params_[i].value, *params_[i].grad,
                   velocity_.empty() ? nullptr : &velocity_[i]);
  }
}

std::vector<std::pair<std::string, Tensor*>> Sgd::State() {
  std::vector<std::pair<std::string, Tensor*>> state;
  for (size_t i = 0; i < velocity_.size(); ++i) {
    state.push_back({params_[i].name + ".momentum", &velocity_[i]});
  }
  return state;
}

AdamW::AdamW(std::vector<Parameter> params, AdamWParams options)
    : Optimizer(std::move(params)), options_(options) {
  CheckLr(options.lr);
  TANDEM_CHECK(options.beta1 >= 0.f && options.beta1 < 1.f &&
               options.beta2 >= 0.f && options.beta2 < 1.f)
      << "AdamW betas must be in [0, 1), got " << options.beta1 << ", "
      << options.beta2;
  for (Parameter& p : params_) {
    m_.push_back(Tensor::Zeros(p.value->shape(), p.value->device()));
    v_.push_back(Tensor::Zeros(p.value->shape(), p.value->device()));
  }
}

void AdamW::set_lr(float lr) {
  CheckLr(lr);
  options_.lr = lr;
}

void AdamW::Step() { UpdateAllAndCount(); }

void AdamW::UpdateParameters(const std::vector<size_t>& indices) {
  // The step being taken: Step counts it after the updates.
  const int64_t step = steps_ + 1;
  for (size_t i : indices) {
    TANDEM_CHECK(i < params_.size()) << "parameter index " << i << " of " << params_.size();
    ops::AdamWUpdate(options_, step, *params_[i].value, *params_[i].grad, m_[i], v_[i]);
  }
}

std::vector<std::pair<std::string, Tensor*>> AdamW::State() {
  std::vector<std::pair<std::string, Tensor*>> state;
  for (size_t i = 0; i < params_.size(); ++i) {
    state.push_back({params_[i].name + ".adam_m", &m_[i]});
    state.push_back({params_[i].name + ".adam_v", &v_[i]});
  }
  return state;
}

void ValidateOptimizerConfig(const OptimizerConfig& config) {
  TANDEM_CHECK(config.name == "sgd" || config.name == "adamw")
      << "unknown optimizer '" << config.name
      << "' (--optimizer): expected sgd or adamw";
  CheckLr(config.lr);
  TANDEM_CHECK(config.name != "sgd" || (config.momentum >= 0.f && config.momentum < 1.f))
      << "--momentum must be in [0, 1), got " << config.momentum;
}

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config,
                                         std::vector<Parameter> params) {
  if (config.name == "sgd") {
    SgdParams p;
    p.lr = config.lr;
    p.momentum = config.momentum;
    p.nesterov = config.nesterov;
    p.weight_decay = config.weight_decay;
    return std::make_unique<Sgd>(std::move(params), p);
  }
  if (config.name == "adamw") {
    AdamWParams p;
    p.lr = config.lr;
    p.weight_decay = config.weight_decay;
    return std::make_unique<AdamW>(std::move(params), p);
  }
  TANDEM_CHECK(false) << "unknown optimizer '" << config.name
                      << "' (--optimizer): expected sgd or adamw";
  return nullptr;
}

}  // namespace tandem
