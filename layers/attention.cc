#include "layers/attention.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

// Note [Heads from a view]
// Rule: the products and the softmax run once over all heads * batch
// matrices, from q, k and v that are contiguous [heads * batch, T,
// head_size] tensors: thirds of one [3, heads, batch * T, head_size] buffer.
// Mechanism: the projection's output [batch * T, 3 * width] is [rows, 3,
// heads, head_size]; one Permute makes it [3, heads, rows, head_size] =
// [3, heads * batch, T, head_size], every other step a view. Merging is the
// inverse Permute, and Backward runs them the other way. The heads come out
// ordered (head, batch), not (batch, head): the batched ops do not care,
// and the merge undoes it.
// Why a copy: tensors are contiguous (core/tensor.h), so the reordering
// moves every element, in one pass (head_size elements at a time).
namespace {

// out [n, heads * batch, T, hs] (n * heads * batch matrices) from x [rows =
// batch * T, n * heads * hs]: Note [Heads from a view].
void SplitHeads(const Lane& lane, const Tensor& x, int64_t n, int64_t heads, Tensor& out) {
  const int64_t rows = x.dim(0), hs = x.dim(1) / (n * heads);
  Tensor split = out.Reshape({n, heads, rows, hs});
  ops::Permute(lane, x.Reshape({rows, n, heads, hs}), {1, 2, 0, 3}, split);
}

// The inverse: out [rows, n * heads * hs] from x [n, heads * batch, T, hs].
void MergeHeads(const Lane& lane, const Tensor& x, int64_t n, int64_t heads, Tensor& out) {
  const int64_t rows = out.dim(0), hs = x.dim(-1);
  Tensor merged = out.Reshape({rows, n, heads, hs});
  ops::Permute(lane, x.Reshape({n, heads, rows, hs}), {2, 0, 1, 3}, merged);
}

// One third of a [3, heads * batch, T, hs] buffer: q (0), k (1) or v (2).
Tensor Third(const Tensor& buffer, int64_t i) {
  return buffer.Slice(i, i + 1).Reshape({buffer.dim(1), buffer.dim(2), buffer.dim(3)});
}

int64_t CheckedHeadSize(const std::string& name, int64_t width, int64_t heads) {
  TANDEM_CHECK(width > 0 && heads > 0)
      << "layer '" << name << "' (MultiHeadSelfAttention): width and heads must be positive, "
      << "got width " << width << " and " << heads << " heads";
  TANDEM_CHECK(width % heads == 0)
      << "layer '" << name << "' (MultiHeadSelfAttention): width " << width
      << " is not divisible by " << heads << " heads: each head takes width / heads features";
  return width / heads;
}

LinearOptions ProjectionOptions(const AttentionOptions& options) {
  LinearOptions o;
  o.init = options.init;
  o.device = options.device;
  o.precision = options.precision;
  return o;
}

}  // namespace

MultiHeadSelfAttention::MultiHeadSelfAttention(std::string name, int64_t width, int64_t heads,
                                               Rng& rng, AttentionOptions options)
    : name_(std::move(name)),
      width_(width),
      heads_(heads),
      head_size_(CheckedHeadSize(name_, width, heads)),
      options_(options),
      qkv_("qkv", width, 3 * width, rng, ProjectionOptions(options)),
      proj_("proj", width, width, rng, ProjectionOptions(options)) {
  policy_.precision = options.precision;
}

std::string MultiHeadSelfAttention::Describe() const {
  std::ostringstream out;
  out << name_ << " (MultiHeadSelfAttention " << width_ << ", " << heads_
      << (heads_ == 1 ? " head" : " heads");
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

Tensor MultiHeadSelfAttention::ForwardWith(const Tensor& x, const ForwardArgs& args) {
  TANDEM_CHECK(x.rank() == 3 && x.dim(2) == width_ && x.dim(1) > 0)
      << "layer '" << name_ << "' (MultiHeadSelfAttention " << width_ << ", " << heads_
      << " heads) got input " << ShapeToString(x.shape()) << ": expected [batch, T, "
      << width_ << "] with T > 0";
  const int64_t batch = x.dim(0), T = x.dim(1), rows = batch * T;
  const Lane lane = ops::MainLaneOf(x);
  const Tensor qkv = ForwardChild(qkv_, x, args);  // [batch, T, 3 width]
  Tensor heads = Tensor::Empty({3, heads_ * batch, T, head_size_}, x.device(), qkv.dtype());
  SplitHeads(lane, qkv.Reshape({rows, 3 * width_}), 3, heads_, heads);
  const Tensor q = Third(heads, 0), k = Third(heads, 1), v = Third(heads, 2);
  ops::BatchedMatMulOptions o;
  o.tf32 = policy_.tf32();
  // probs = causal softmax of q k^T / sqrt(hs), in place over the scores.
  Tensor probs = Tensor::Empty({heads_ * batch, T, T}, x.device(), qkv.dtype());
  ops::BatchedMatMul(lane, q, false, k, true, probs, o);
  ops::CausalSoftmax(lane, probs, 1.f / std::sqrt(static_cast<float>(head_size_)), probs);
  Tensor y = Tensor::Empty({heads_ * batch, T, head_size_}, x.device(), qkv.dtype());
  ops::BatchedMatMul(lane, probs, false, v, false, y, o);  // [heads * batch, T, hs]
  Tensor merged = Tensor::Empty({rows, width_}, x.device(), qkv.dtype());
  MergeHeads(lane, y, 1, heads_, merged);
  qkv_heads_.Save(heads);
  probs_.Save(probs);
  input_shape_ = x.shape();
  return ForwardChild(proj_, merged.Reshape({batch, T, width_}), args);
}

Tensor MultiHeadSelfAttention::Backward(const Tensor& dy) {
  const BackwardArgs args = BackwardArgs::For(dy.device());
  Tensor dx = BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

// With s = q k^T / sqrt(hs), p = causal softmax(s), y = p v:
//   dp = dy v^T, dv = p^T dy, ds = CausalSoftmaxBackward(p, dp),
//   dq = ds k / sqrt(hs) and dk = ds^T q / sqrt(hs) (the scale is in ds).
Tensor MultiHeadSelfAttention::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  const Tensor heads = qkv_heads_.Get(*this);
  const Tensor probs = probs_.Get(*this);
  TANDEM_CHECK(dy.shape() == input_shape_)
      << "layer '" << name_ << "' (MultiHeadSelfAttention " << width_ << ", " << heads_
      << " heads) got output gradient " << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(input_shape_);
  const int64_t batch = input_shape_[0], T = input_shape_[1], rows = batch * T;
  const Lane& lane = args.lane;
  BackwardArgs inner = args;
  inner.input_grad = true;
  const Tensor dmerged = BackwardChild(proj_, dy, inner);  // [batch, T, width]
  const Tensor dm = ops::ToDType(lane, dmerged, heads.dtype());
  Tensor dyh = Tensor::Empty({1, heads_ * batch, T, head_size_}, dy.device(), heads.dtype());
  SplitHeads(lane, dm.Reshape({rows, width_}), 1, heads_, dyh);
  const Tensor dy_heads = dyh.Reshape({heads_ * batch, T, head_size_});
  ops::BatchedMatMulOptions o;
  o.tf32 = policy_.tf32();
  Tensor dprobs = Tensor::Empty(probs.shape(), dy.device(), heads.dtype());
  Tensor dheads = Tensor::Empty(heads.shape(), dy.device(), heads.dtype());
  Tensor dq = Third(dheads, 0), dk = Third(dheads, 1), dv = Third(dheads, 2);
  ops::BatchedMatMul(lane, dy_heads, false, Third(heads, 2), true, dprobs, o);  // dy v^T
  ops::BatchedMatMul(lane, probs, true, dy_heads, false, dv, o);               // p^T dy
  ops::CausalSoftmaxBackward(lane, probs, dprobs,
                             1.f / std::sqrt(static_cast<float>(head_size_)), dprobs);
  ops::BatchedMatMul(lane, dprobs, false, Third(heads, 1), false, dq, o);  // ds k
  ops::BatchedMatMul(lane, dprobs, true, Third(heads, 0), false, dk, o);   // ds^T q
  Tensor dqkv = Tensor::Empty({rows, 3 * width_}, dy.device(), heads.dtype());
  MergeHeads(lane, dheads, 3, heads_, dqkv);
  // One Forward allows one Backward: what it kept goes back to the allocator.
  qkv_heads_.Reset();
  probs_.Reset();
  // The input gradient only where the caller wants it (args.input_grad).
  const Tensor dx = BackwardChild(qkv_, dqkv.Reshape({batch, T, 3 * width_}), args);
  if (args.on_params_ready) args.on_params_ready();
  return dx;
}

}  // namespace tandem
