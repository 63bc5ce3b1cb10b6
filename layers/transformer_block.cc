#include "layers/transformer_block.h"

#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {
namespace {

AttentionOptions AttentionOptionsOf(const TransformerBlockOptions& options) {
  AttentionOptions o;
  o.device = options.device;
  o.precision = options.precision;
  o.init = options.init;
  return o;
}

LayerNormOptions LayerNormOptionsOf(const TransformerBlockOptions& options) {
  LayerNormOptions o;
  o.eps = options.layer_norm_eps;
  o.precision = options.precision;
  return o;
}

LinearOptions LinearOptionsOf(const TransformerBlockOptions& options, Activation activation) {
  LinearOptions o;
  o.activation = activation;
  o.init = options.init;
  o.device = options.device;
  o.precision = options.precision;
  return o;
}

// Checked here, so that the error names the block (its children's would
// name only themselves: "attn").
int64_t CheckedWidth(const std::string& name, int64_t width, int64_t heads,
                     const TransformerBlockOptions& options) {
  TANDEM_CHECK(width > 0 && heads > 0 && options.mlp_ratio > 0)
      << "layer '" << name << "' (TransformerBlock): width, heads and mlp_ratio must be "
      << "positive, got " << width << ", " << heads << " and " << options.mlp_ratio;
  TANDEM_CHECK(width % heads == 0)
      << "layer '" << name << "' (TransformerBlock): width " << width
      << " is not divisible by " << heads << " heads: each head takes width / heads features";
  return width;
}

// a + b into a new tensor, in b's dtype (a branch's; its input may be
// float32 data in a bf16 model), on `lane`.
Tensor Sum(const Lane& lane, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::Empty(b.shape(), b.device(), b.dtype());
  ops::Add(lane, ops::ToDType(lane, a, b.dtype()), b, out);
  return out;
}

}  // namespace

TransformerBlock::TransformerBlock(std::string name, int64_t width, int64_t heads, Rng& rng,
                                   TransformerBlockOptions options)
    : name_(std::move(name)),
      width_(CheckedWidth(name_, width, heads, options)),
      options_(options),
      ln1_("ln1", width, options.device, LayerNormOptionsOf(options)),
      attn_("attn", width, heads, rng, AttentionOptionsOf(options)),
      ln2_("ln2", width, options.device, LayerNormOptionsOf(options)),
      mlp_fc_("mlp_fc", width, options.mlp_ratio * width, rng,
              LinearOptionsOf(options, Activation::kGelu)),
      mlp_proj_("mlp_proj", options.mlp_ratio * width, width, rng,
                LinearOptionsOf(options, Activation::kIdentity)) {}

std::string TransformerBlock::Describe() const {
  std::ostringstream out;
  out << name_ << " (TransformerBlock " << width_ << ", " << attn_.heads()
      << (attn_.heads() == 1 ? " head" : " heads");
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

Tensor TransformerBlock::ForwardWith(const Tensor& x, const ForwardArgs& args) {
  TANDEM_CHECK(x.rank() == 3 && x.dim(2) == width_)
      << "layer '" << name_ << "' (TransformerBlock " << width_ << ", " << attn_.heads()
      << " heads) got input " << ShapeToString(x.shape()) << ": expected [batch, T, " << width_
      << "]";
  const Lane lane = ops::MainLaneOf(x);
  const Tensor a = ForwardChild(attn_, ForwardChild(ln1_, x, args), args);
  const Tensor h = Sum(lane, x, a);
  const Tensor m = ForwardChild(ln2_, h, args);
  const Tensor f = ForwardChild(mlp_proj_, ForwardChild(mlp_fc_, m, args), args);
  input_shape_ = x.shape();
  return Sum(lane, h, f);
}

Tensor TransformerBlock::Backward(const Tensor& dy) {
  const BackwardArgs args = BackwardArgs::For(dy.device());
  Tensor dx = BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

Tensor TransformerBlock::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  TANDEM_CHECK(!input_shape_.empty())
      << "layer " << Describe() << ": Backward without a Forward before it (each Forward "
      << "allows one Backward)";
  TANDEM_CHECK(dy.shape() == input_shape_)
      << "layer '" << name_ << "' (TransformerBlock " << width_ << ", " << attn_.heads()
      << " heads) got output gradient " << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(input_shape_);
  input_shape_.clear();
  const Lane& lane = args.lane;
  BackwardArgs inner = args;
  inner.input_grad = true;
  // y = h + mlp(ln2(h)): dh = dy + the MLP branch's input gradient.
  Tensor g = BackwardChild(mlp_proj_, dy, inner);
  g = BackwardChild(mlp_fc_, g, inner);
  g = BackwardChild(ln2_, g, inner);
  const Tensor dh = Sum(lane, g, dy);
  // h = x + attn(ln1(x)): dx = dh + the attention branch's input gradient.
  g = BackwardChild(attn_, dh, inner);
  BackwardArgs first = inner;
  first.input_grad = args.input_grad;
  g = BackwardChild(ln1_, g, first);
  if (args.on_params_ready) args.on_params_ready();
  if (!args.input_grad) return Tensor();
  return Sum(lane, g, dh);
}

}  // namespace tandem
