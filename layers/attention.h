// MultiHeadSelfAttention: causal multi-head self-attention over a sequence,
// GPT-2's, on x [batch, T, width]:
//
//   Rng rng(0);
//   MultiHeadSelfAttention attn("attn", 64, 4, rng);   // 4 heads of 16
//   Tensor y = attn.Forward(x);      // x [batch, T, 64] -> y [batch, T, 64]
//   Tensor dx = attn.Backward(dy);   // adds into attn.qkv.* and attn.proj.*
//
// One Linear (width -> 3 width, "<name>.qkv") projects every position to
// its query, key and value at once; each head h attends with q_h k_h^T /
// sqrt(head_size), masked so position t sees positions 0..t only; the
// heads' outputs, side by side, go through a second Linear (width -> width,
// "<name>.proj"). The two Linears are its children (Children()), so
// checkpoints, the data-parallel reducer and the hooks of a pass reach them
// as they reach any layer of the tree.
//
// The products over every (batch, head) pair are single batched ops
// (core/ops_attention.h) on a [3, heads * batch, T, head_size] buffer of q,
// k and v, whose thirds are views. Splitting the projection into heads is
// a permute, which with contiguous tensors is a copy: two (a Transpose and a
// TransposeLastTwo of [batch * T, 3 width]), and two more to merge the heads
// back ([batch * T, width]); Backward mirrors them. See Note [Heads from a
// view] in attention.cc.
//
// Precision as for Linear (layers/precision.h): in bf16 the projections,
// q, k, v, the scores and probabilities are bfloat16, the softmax and every
// product accumulate in float32.
#ifndef TANDEM_LAYERS_ATTENTION_H_
#define TANDEM_LAYERS_ATTENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/linear.h"
#include "layers/precision.h"
#include "layers/saved_tensor.h"

namespace tandem {

struct AttentionOptions {
  Device device = Device::Cpu();
  Precision precision = Precision::kFp32;
  // Of both projections' weights; their biases start at zero.
  Init init = Init::kXavierUniform;
};

class MultiHeadSelfAttention : public Layer {
 public:
  // width must be a multiple of heads: each head attends over width / heads
  // features. The projections' weights are drawn from `rng` on the host
  // (qkv's, then proj's), so the same seed gives the same layer everywhere.
  MultiHeadSelfAttention(std::string name, int64_t width, int64_t heads, Rng& rng,
                         AttentionOptions options = {});

  // x [batch, T, width] -> y [batch, T, width], in the compute dtype.
  Tensor Forward(const Tensor& x) override { return ForwardWith(x, ForwardArgs()); }
  // The projections through ForwardChild (args.hooks hears of each).
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args) override;
  // dy [batch, T, width] -> dx [batch, T, width], on the main lane, joined.
  Tensor Backward(const Tensor& dy) override;
  // proj's BackwardChild, the attention's backward on args.lane, then qkv's
  // BackwardChild (input gradient as args.input_grad asks), then
  // args.on_params_ready. Like Linear's, nothing joins args.param_lane.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  // qkv, proj: parameters "<name>.qkv.weight", ..., "<name>.proj.bias".
  std::vector<Layer*> Children() override { return {&qkv_, &proj_}; }
  std::string Name() const override { return name_; }
  // "attn (MultiHeadSelfAttention 64, 4 heads)", with the precision when
  // not fp32.
  std::string Describe() const override;

  int64_t width() const { return width_; }
  int64_t heads() const { return heads_; }
  int64_t head_size() const { return head_size_; }
  Linear& qkv() { return qkv_; }    // weight [3 width, width]: q, k, v rows
  Linear& proj() { return proj_; }  // weight [width, width]

 private:
  std::string name_;
  int64_t width_;
  int64_t heads_;
  int64_t head_size_;
  AttentionOptions options_;
  PrecisionPolicy policy_;
  Linear qkv_;
  Linear proj_;
  // From the last Forward, for Backward: q, k and v, [3, heads * batch, T,
  // head_size], and the attention probabilities [heads * batch, T, T].
  SavedTensor qkv_heads_{"queries, keys and values"};
  SavedTensor probs_{"attention probabilities"};
  Shape input_shape_;  // [batch, T, width]
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_ATTENTION_H_
