#include "layers/linear.h"

#include <cmath>
#include <optional>
#include <utility>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Init ParseInit(const std::string& name) {
  if (name == "kaiming_uniform") return Init::kKaimingUniform;
  if (name == "kaiming_normal") return Init::kKaimingNormal;
  if (name == "xavier_uniform") return Init::kXavierUniform;
  if (name == "xavier_normal") return Init::kXavierNormal;
  TANDEM_CHECK(false) << "unknown init '" << name
                      << "': expected kaiming_uniform, kaiming_normal, "
                         "xavier_uniform or xavier_normal";
  return Init::kKaimingUniform;
}

namespace {
std::vector<float> InitialWeights(Init init, int64_t in, int64_t out, Rng& rng) {
  std::vector<float> w(static_cast<size_t>(in * out));
  const double fan_sum = static_cast<double>(in + out);
  switch (init) {
    case Init::kKaimingUniform: {
      const float bound = static_cast<float>(std::sqrt(6.0 / in));
      for (float& x : w) x = rng.Uniform(-bound, bound);
      break;
    }
    case Init::kKaimingNormal: {
      const float std = static_cast<float>(std::sqrt(2.0 / in));
      for (float& x : w) x = rng.Normal(0.f, std);
      break;
    }
    case Init::kXavierUniform: {
      const float bound = static_cast<float>(std::sqrt(6.0 / fan_sum));
      for (float& x : w) x = rng.Uniform(-bound, bound);
      break;
    }
    case Init::kXavierNormal: {
      const float std = static_cast<float>(std::sqrt(2.0 / fan_sum));
      for (float& x : w) x = rng.Normal(0.f, std);
      break;
    }
  }
  return w;
}
}  // namespace

Linear::Linear(std::string name, int64_t in_features, int64_t out_features,
               Rng& rng, LinearOptions options)
    : name_(std::move(name)), in_(in_features), out_(out_features),
      options_(options),
      pre_activation_(options.activation == Activation::kRelu ? "output" : "pre-activation") {
  TANDEM_CHECK(in_ > 0 && out_ > 0)
      << "layer '" << name_ << "': Linear sizes must be positive, got " << in_
      << "→" << out_;
  policy_.precision = options.precision;
  weight_ = Parameter(Tensor::FromVector(InitialWeights(options.init, in_, out_, rng),
                                         {out_, in_}, options.device));
  if (options.bias) bias_ = Parameter(Tensor::Zeros({out_}, options.device));
  if (policy_.bf16()) {
    // Empty placeholders: SyncWorkingCopies allocates and writes them where
    // Parameters() hands them out (Note [bf16 where the device does not
    // multiply bfloat16] in layers/precision.h).
    weight_.KeepWorkingCopy(DType::kBFloat16);
    if (options.bias) bias_.KeepWorkingCopy(DType::kBFloat16);
    SyncWorkingCopies(*this);
  }
}

std::string Linear::Describe() const {
  std::ostringstream out;
  out << name_ << " (Linear " << in_ << "→" << out_;
  if (options_.activation != Activation::kIdentity) {
    out << ", " << ActivationName(options_.activation);
  }
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

std::vector<NamedParameter> Linear::Parameters() {
  const bool working = has_working_copies();
  std::vector<NamedParameter> params = {{name_ + ".weight", &weight_, working}};
  if (options_.bias) params.push_back({name_ + ".bias", &bias_, working});
  return params;
}

namespace {
// `shape` with its last dimension replaced by `last`.
Shape WithLastDim(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}
}  // namespace

Tensor Linear::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() >= 2 && x.dim(-1) == in_)
      << "layer '" << name_ << "' (Linear " << in_ << "→" << out_
      << ") got input " << ShapeToString(x.shape()) << ": expected [batch, "
      << in_ << "] or [..., " << in_ << "]";
  TANDEM_CHECK(x.device() == weight_.value().device())
      << "layer '" << name_ << "' has parameters on " << weight_.value().device()
      << " but got input on " << x.device();
  // [..., in] is [rows, in] as a view: the GEMMs below see only 2-D tensors,
  // and the output goes back to [..., out] as a view too.
  input_shape_ = x.shape();
  const Tensor x2 = x.rank() == 2 ? x : x.Reshape({x.numel() / in_, in_});
  return Forward2D(x2).Reshape(WithLastDim(x.shape(), out_));
}

Tensor Linear::Forward2D(const Tensor& x) {
  // A float32 input (data) is cast to bfloat16 here where the layer
  // computes in bfloat16. Saved with its version: a write into it by the
  // caller after Forward then fails Backward (layers/saved_tensor.h).
  input_.Save(ops::ToDType(x, compute_dtype()));
  const Tensor& input = input_.tensor();
  const DType dtype = compute_dtype();
  Tensor y = Tensor::Empty({x.dim(0), out_}, x.device(), dtype);
  ops::GemmOptions o;
  o.tf32 = policy_.tf32();
  if (options_.activation == Activation::kIdentity ||
      options_.activation == Activation::kRelu) {
    // One GEMM with the bias and ReLU in its epilogue (cuBLASLt on a GPU).
    // ReLU's gradient needs only the sign of x W^T + b, which the output
    // keeps (relu(z) > 0 exactly when z > 0), so nothing else is stored.
    o.bias = options_.bias ? &bias_for_math() : nullptr;
    o.activation = options_.activation;
    ops::Gemm(input, false, weight_for_math(), true, y, o);  // [batch, in] x [out, in]^T
    if (options_.activation == Activation::kRelu) pre_activation_.Save(y);
    return y;
  }
  ops::Gemm(input, false, weight_for_math(), true, y, o);
  // GELU and tanh: keep x W^T + b for the activation's gradient (the bias
  // is added into y in place); out gets act() of it.
  Tensor out = Tensor::Empty(y.shape(), y.device(), dtype);
  if (options_.bias) {
    ops::BiasActivation(options_.activation, y, bias_for_math(), &y, out);
  } else {
    ops::ActivationForward(options_.activation, y, out);
  }
  pre_activation_.Save(y);
  return out;
}

Tensor Linear::Backward(const Tensor& dy) {
  const BackwardArgs args = BackwardArgs::For(dy.device());
  Tensor dx = BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

// Also checks that nothing wrote into the saved tensors since Forward; the
// rest of Backward then reads them unchecked.
void Linear::CheckBackward(const Tensor& dy) const {
  input_.Get(*this);
  if (options_.activation != Activation::kIdentity) pre_activation_.Get(*this);
  const Shape expected = WithLastDim(input_shape_, out_);
  TANDEM_CHECK(dy.shape() == expected)
      << "layer '" << name_ << "' (Linear " << in_ << "→" << out_
      << ") got output gradient " << ShapeToString(dy.shape())
      << ": expected " << ShapeToString(expected);
}

Linear::PreActivationGrad Linear::PreActivationGradient(const BackwardArgs& args,
                                                        const Tensor& dy) {
  const Lane& lane = args.lane;
  const Tensor g = ops::ToDType(lane, dy, compute_dtype());
  if (options_.activation == Activation::kIdentity) return {g, Tensor()};
  Tensor dz = Tensor::Empty(g.shape(), g.device(), g.dtype());
  if (!BiasSummedWithActivation()) {
    ops::ActivationBackward(lane, options_.activation, pre_activation_.tensor(), g, dz);
    return {dz, Tensor()};
  }
  // The bias gradient comes out of the same pass over dz: into the gradient
  // (written or added to, as the weight's), or, for an update in Backward,
  // into float32 sums that the update reads on the parameter lane.
  PreActivationGrad grad{dz, Tensor()};
  if (args.update != nullptr) {
    grad.bias_sums = Tensor::Empty(bias_.value().shape(), bias_.value().device());
    ops::ActivationBackwardColumnSums(lane, options_.activation, pre_activation_.tensor(), g,
                                      dz, grad.bias_sums);
    return grad;
  }
  const float beta = args.grad_mode == GradMode::kAccumulate ? 1.f : 0.f;
  ops::ActivationBackwardColumnSums(lane, options_.activation, pre_activation_.tensor(), g, dz,
                                    bias_.grad(), beta);
  return grad;
}

// Gradients dropped by an update in an earlier Backward are made again,
// zeroed on `lane`, before the parameter lane waits for it: its GEMM then
// adds into zeros.
void Linear::MakeGradients(const Lane& lane) {
  for (Parameter* p : {&weight_, &bias_}) {
    if (p == &bias_ && !options_.bias) continue;
    if (p->grad().defined()) continue;
    p->grad() = Tensor::Empty(p->value().shape(), p->value().device());
    ops::Fill(lane, p->grad(), 0.f);
  }
}

// Note [Parameter lane]
// The weight gradient needs nothing the layer below waits for, so it may run
// beside the input-gradient GEMM: on a GPU the two then share the SMs and
// neither leaves them idle at its tail. When the caller gives one lane for
// both, the parameter gradients come first on it: their all-reduce can then
// start while the input gradient is computed, instead of after both GEMMs
// (Note [Gradients first] in parallel/reducer.cc).
//
// Note [Update after the input gradient]
// With an update (SGD in backward) the weight GEMM writes the new weights
// over the old ones, so it is queued after the input-gradient GEMM, which
// reads them (or their working copy); it still runs beside the layers below.
// The gradients are then not kept: the layer drops them, and makes them
// again, zeroed, when a later Backward writes gradients.
void Linear::ParameterGradients(const BackwardArgs& args, const PreActivationGrad& grad) {
  const Lane& lane = args.param_lane;
  const Tensor& dz = grad.dz;
  ops::WaitFor(lane, args.lane);  // dz, the input and the gradients' zeros are queued on args.lane
  // dz^T x, or (dz^T) x from a transposed copy where the backend's GEMM
  // reads that layout faster (Backend::GemmWantsATransposed).
  const Tensor* a = &dz;
  bool trans_a = true;
  Tensor dz_t;
  if (dz.backend().GemmWantsATransposed(dz.dtype(), policy_.tf32())) {
    dz_t = Tensor::Empty({dz.dim(1), dz.dim(0)}, dz.device(), dz.dtype());
    ops::Transpose(lane, dz, dz_t);
    a = &dz_t;
    trans_a = false;
    UsedOnParamLane(args, dz_t);
  }
  if (args.update != nullptr) {
    weight_.grad() = Tensor();
    bias_.grad() = Tensor();
    args.update->FromGemm(lane, weight_, *a, trans_a, input_.tensor(), false, policy_.tf32());
    if (BiasSummedWithActivation()) {
      UsedOnParamLane(args, grad.bias_sums);
      args.update->FromGradient(lane, bias_, grad.bias_sums);
    } else if (options_.bias) {
      args.update->FromColumnSums(lane, bias_, dz);
    }
    return;
  }
  // float32 gradients, from bfloat16 operands in bf16 mode.
  const bool accumulate = args.grad_mode == GradMode::kAccumulate;
  ops::GemmOptions o;
  o.beta = accumulate ? 1.f : 0.f;
  o.tf32 = policy_.tf32();
  ops::Gemm(lane, *a, trans_a, input_.tensor(), false, weight_.grad(), o);  // dz^T x
  if (options_.bias && !BiasSummedWithActivation()) {
    ops::ColumnSums(lane, dz, bias_.grad(), o.beta);
  }
}

Tensor Linear::InputGradient(const BackwardArgs& args, const Tensor& dz) {
  if (!args.input_grad) return Tensor();
  const Tensor& input = input_.tensor();
  Tensor dx = Tensor::Empty(input.shape(), input.device(), compute_dtype());
  ops::GemmOptions o;
  o.tf32 = policy_.tf32();
  ops::Gemm(args.lane, dz, false, weight_for_math(), false, dx, o);  // dz W
  return dx;
}

// Note [What Backward keeps]
// A Forward allows one Backward, which drops what Forward kept as it
// returns, so that memory goes back to the allocator as backward proceeds.
// What args.param_lane reads (the input, dz, a transposed copy of dz, the
// bias sums of an update) may still be read there after Backward returns
// when that lane is another queue: those tensors are marked with
// Tensor::RecordLane, so their memory is reused only after that work
// (Note [Stream-ordered reuse] in core/cuda/caching_allocator.h).
void Linear::DropBackwardState(const BackwardArgs& args, const Tensor& dz) {
  pre_activation_.Reset();
  UsedOnParamLane(args, input_.tensor());
  UsedOnParamLane(args, dz);
  input_.Reset();
}

void Linear::UsedOnParamLane(const BackwardArgs& args, const Tensor& t) {
  if (!SameQueue(args.lane, args.param_lane)) t.RecordLane(args.param_lane);
}

Tensor Linear::BackwardWith(const Tensor& dy_in, const BackwardArgs& args) {
  CheckBackward(dy_in);
  // An N-d dy [..., out] is [rows, out] as a view, as the input was; dx
  // goes back to the input's shape as a view.
  const Tensor dy = dy_in.rank() == 2 ? dy_in : dy_in.Reshape({dy_in.numel() / out_, out_});
  const Shape input_shape = input_shape_;
  if (args.update == nullptr) MakeGradients(args.lane);
  PreActivationGrad grad = PreActivationGradient(args, dy);
  Tensor dx;
  if (args.update != nullptr) {
    // See Note [Update after the input gradient].
    dx = InputGradient(args, grad.dz);
    ParameterGradients(args, grad);
    if (args.on_params_ready) args.on_params_ready();
  } else {
    // See Note [Parameter lane].
    ParameterGradients(args, grad);
    if (args.on_params_ready) args.on_params_ready();
    dx = InputGradient(args, grad.dz);
  }
  DropBackwardState(args, grad.dz);
  if (dx.defined() && input_shape.size() != 2) dx = dx.Reshape(input_shape);
  return dx;
}

}  // namespace tandem
