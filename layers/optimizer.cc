#include "layers/optimizer.h"

#include <cmath>

#include "core/backend_registry.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/profile_range.h"

namespace tandem {
namespace {
void CheckLr(float lr) {
  TANDEM_CHECK(std::isfinite(lr) && lr >= 0.f)
      << "learning rate must be a non-negative number, got " << lr
      << " (--lr)";
}

// A layer whose parameter was updated inside Backward keeps no gradient for
// it (Note [Update after the input gradient] in layers/linear.cc).
const Tensor& GradientOf(const NamedParameter& p) {
  TANDEM_CHECK(p.grad().defined())
      << "parameter '" << p.name << "' has no gradient to step with: its last "
         "Backward updated it in place (BackwardArgs::update)";
  return p.grad();
}
}  // namespace

Optimizer::Optimizer(std::vector<NamedParameter> params) : params_(std::move(params)) {
  for (const NamedParameter& p : params_) {
    TANDEM_CHECK(p.parameter != nullptr && p.value().defined())
        << "optimizer got parameter '" << p.name << "' without value or grad";
    TANDEM_CHECK(!p.grad().defined() || p.value().shape() == p.grad().shape())
        << "parameter '" << p.name << "' is " << ShapeToString(p.value().shape())
        << " but its gradient is " << ShapeToString(p.grad().shape());
  }
}

void Optimizer::ZeroGrad() {
  for (NamedParameter& p : params_) {
    if (p.grad().defined()) ops::Fill(p.grad(), 0.f);  // none: made zeroed when written
  }
}

void Optimizer::CheckNotSharded(const char* what) const {
  TANDEM_CHECK(!sharded_)
      << "optimizer '" << Name() << "' keeps sharded state (ZeRO-1: ShardState, "
      << "--shard_optimizer), so each worker updates only its shards, inside the "
      << "reducer's Backward (ShardedOptimizerHook): " << what;
}

// "AdamW update", "SGD update": what profiles and traces call an update.
const char* Optimizer::UpdateRangeName() const {
  const std::string name = Name();
  return name == "sgd" ? "SGD update" : name == "adamw" ? "AdamW update" : "optimizer update";
}

void Optimizer::UpdateParameters(const std::vector<size_t>& indices, const Lane& lane) {
  CheckNotSharded("it cannot update whole parameters; do not call Step()");
  ProfileRange range(UpdateRangeName());
  // The step being taken: FinishStep counts it after the updates.
  const int64_t step = steps_ + 1;
  for (size_t i : indices) {
    TANDEM_CHECK(i < params_.size()) << "parameter index " << i << " of " << params_.size();
    UpdateSlot(lane, step, i, params_[i].value(), GradientOf(params_[i]), params_[i].working());
  }
}

void Optimizer::ShardState(std::vector<ParameterShard> shards) {
  TANDEM_CHECK(steps_ == 0)
      << "optimizer '" << Name() << "' has taken " << steps_ << " step(s): shard its state "
      << "before the first step (register the ShardedOptimizerHook before training or "
         "restoring a checkpoint)";
  TANDEM_CHECK(!sharded_) << "optimizer '" << Name() << "' is sharded already";
  std::vector<Shape> shapes;
  Device device = Device::Cpu();
  for (const ParameterShard& s : shards) {
    TANDEM_CHECK(s.value.defined() && s.grad.defined() && s.value.rank() == 1 &&
                 s.value.shape() == s.grad.shape() && s.value.dtype() == DType::kFloat32)
        << "optimizer '" << Name() << "': shard '" << s.name
        << "' needs a flat float32 value and a gradient of its shape, got "
        << ShapeToString(s.value.shape()) << " and " << ShapeToString(s.grad.shape());
    TANDEM_CHECK(shapes.empty() || s.value.device() == device)
        << "optimizer '" << Name() << "': shard '" << s.name << "' is on "
        << s.value.device() << " but the first is on " << device;
    device = s.value.device();
    shapes.push_back(s.value.shape());
  }
  ResetState(shapes, device);
  shards_ = std::move(shards);
  sharded_ = true;
}

void Optimizer::UpdateShards(const std::vector<size_t>& indices, const Lane& lane) {
  TANDEM_CHECK(sharded_) << "optimizer '" << Name()
                         << "': UpdateShards before ShardState (no shards)";
  ProfileRange range([&] { return std::string(UpdateRangeName()) + " of shards"; });
  const int64_t step = steps_ + 1;
  for (size_t i : indices) {
    TANDEM_CHECK(i < shards_.size()) << "shard index " << i << " of " << shards_.size();
    ParameterShard& s = shards_[i];
    UpdateSlot(lane, step, i, s.value, s.grad, /*working=*/nullptr);
  }
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::State() {
  std::vector<std::pair<std::string, Tensor*>> state;
  const size_t slots = sharded_ ? shards_.size() : params_.size();
  for (size_t i = 0; i < slots; ++i) {
    const std::string& name = sharded_ ? shards_[i].name : params_[i].name;
    for (auto& [suffix, tensor] : SlotState(i)) state.push_back({name + suffix, tensor});
  }
  return state;
}

int64_t Optimizer::state_bytes() {
  int64_t bytes = 0;
  for (auto& [name, tensor] : State()) bytes += static_cast<int64_t>(tensor->bytes());
  return bytes;
}

void Optimizer::Step() {
  CheckNotSharded("do not call Step()");
  ProfileRange range("optimizer step");
  if (!params_.empty()) {
    std::vector<size_t> all(params_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    UpdateParameters(all, MainLane(params_[0].value().device()));
  }
  FinishStep();
}

// SGD inside Backward: see InBackwardUpdate. Every update is in place, and
// writes the parameter's working copy (bf16) on the same lane; Step then
// updates the parameters no layer updated, from their gradients.
class Sgd::InBackward : public InBackwardUpdate {
 public:
  explicit InBackward(Sgd& sgd) : sgd_(sgd), done_(sgd.params_.size(), false) {}

  void FromGemm(const Lane& lane, Parameter& param, const Tensor& a, bool trans_a,
                const Tensor& b, bool trans_b, bool tf32) override {
    const size_t i = IndexOf(param);
    ops::GemmOptions o;  // param = param - lr op(a) op(b), one GEMM
    o.alpha = -sgd_.options_.lr;
    o.beta = 1.f;
    o.tf32 = tf32;
    ops::Gemm(lane, a, trans_a, b, trans_b, param.value(), o);
    Updated(lane, i);
  }
  void FromColumnSums(const Lane& lane, Parameter& param, const Tensor& x) override {
    const size_t i = IndexOf(param);
    ops::ColumnSums(lane, x, param.value(), 1.f, -sgd_.options_.lr);
    Updated(lane, i);
  }
  void FromGradient(const Lane& lane, Parameter& param, const Tensor& grad) override {
    const size_t i = IndexOf(param);
    ops::Axpy(lane, -sgd_.options_.lr, grad, param.value());
    Updated(lane, i);
  }

  // Returns the parameters not updated in Backward since the last call.
  std::vector<size_t> Finish() {
    std::vector<size_t> left;
    for (size_t i = 0; i < done_.size(); ++i) {
      if (!done_[i]) left.push_back(i);
      done_[i] = false;
    }
    return left;
  }

 private:
  size_t IndexOf(const Parameter& param) const {
    for (size_t i = 0; i < sgd_.params_.size(); ++i) {
      if (sgd_.params_[i].parameter == &param) return i;
    }
    TANDEM_CHECK(false) << "SGD in Backward was handed a parameter it does not "
                           "hold: build the optimizer over the model's Parameters()";
    return 0;
  }
  // The bfloat16 copy follows its master on the lane of the update.
  void Updated(const Lane& lane, size_t i) {
    NamedParameter& p = sgd_.params_[i];
    if (p.working() != nullptr) ops::Cast(lane, p.value(), *p.working());
    done_[i] = true;
  }

  Sgd& sgd_;
  std::vector<bool> done_;
};

Sgd::Sgd(std::vector<NamedParameter> params, SgdParams options)
    : Optimizer(std::move(params)), options_(options) {
  CheckLr(options.lr);
  TANDEM_CHECK(options.momentum >= 0.f && options.momentum < 1.f)
      << "SGD momentum must be in [0, 1), got " << options.momentum;
  TANDEM_CHECK(!options.nesterov || options.momentum > 0.f)
      << "Nesterov SGD needs momentum > 0";
  std::vector<Shape> shapes;
  for (NamedParameter& p : params_) shapes.push_back(p.value().shape());
  ResetState(shapes, params_.empty() ? Device::Cpu() : params_[0].value().device());
}

void Sgd::ResetState(const std::vector<Shape>& shapes, Device device) {
  velocity_.clear();
  if (options_.momentum == 0.f) return;
  // Each parameter's on its own device (a replica's share one).
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Device on = !sharded() && i < params_.size() ? params_[i].value().device() : device;
    velocity_.push_back(Tensor::Zeros(shapes[i], on));
  }
}

Sgd::~Sgd() = default;

InBackwardUpdate* Sgd::in_backward() {
  if (options_.momentum != 0.f || options_.weight_decay != 0.f || sharded()) return nullptr;
  if (in_backward_ == nullptr) in_backward_ = std::make_unique<InBackward>(*this);
  return in_backward_.get();
}

void Sgd::set_lr(float lr) {
  CheckLr(lr);
  options_.lr = lr;
}

void Sgd::Step() {
  if (in_backward_ == nullptr || sharded()) {
    Optimizer::Step();
    return;
  }
  ProfileRange range("optimizer step");
  const std::vector<size_t> left = in_backward_->Finish();
  if (!left.empty()) UpdateParameters(left, MainLane(params_[left[0]].value().device()));
  FinishStep();
}

void Sgd::UpdateSlot(const Lane& lane, int64_t step, size_t slot, Tensor& value,
                     const Tensor& grad, Tensor* working) {
  ops::SgdUpdate(lane, options_, value, grad, velocity_.empty() ? nullptr : &velocity_[slot],
                 working);
}

std::vector<std::pair<std::string, Tensor*>> Sgd::SlotState(size_t slot) {
  if (velocity_.empty()) return {};
  return {{".momentum", &velocity_.at(slot)}};
}

AdamW::AdamW(std::vector<NamedParameter> params, AdamWParams options)
    : Optimizer(std::move(params)), options_(options) {
  CheckLr(options.lr);
  TANDEM_CHECK(options.beta1 >= 0.f && options.beta1 < 1.f &&
               options.beta2 >= 0.f && options.beta2 < 1.f)
      << "AdamW betas must be in [0, 1), got " << options.beta1 << ", "
      << options.beta2;
  std::vector<Shape> shapes;
  for (NamedParameter& p : params_) shapes.push_back(p.value().shape());
  ResetState(shapes, params_.empty() ? Device::Cpu() : params_[0].value().device());
}

void AdamW::ResetState(const std::vector<Shape>& shapes, Device device) {
  m_.clear();
  v_.clear();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Device on = !sharded() && i < params_.size() ? params_[i].value().device() : device;
    m_.push_back(Tensor::Zeros(shapes[i], on));
    v_.push_back(Tensor::Zeros(shapes[i], on));
  }
}

void AdamW::set_lr(float lr) {
  CheckLr(lr);
  options_.lr = lr;
}

void AdamW::UpdateSlot(const Lane& lane, int64_t step, size_t slot, Tensor& value,
                       const Tensor& grad, Tensor* working) {
  ops::AdamWUpdate(lane, options_, step, value, grad, m_.at(slot), v_.at(slot), working);
}

std::vector<std::pair<std::string, Tensor*>> AdamW::SlotState(size_t slot) {
  return {{".adam_m", &m_.at(slot)}, {".adam_v", &v_.at(slot)}};
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
                                         std::vector<NamedParameter> params) {
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
