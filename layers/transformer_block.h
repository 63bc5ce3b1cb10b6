// TransformerBlock: GPT-2's pre-LayerNorm block over x [batch, T, width]:
//
//   h = x + attn(ln1(x))                    attention, causal, `heads` heads
//   y = h + mlp_proj(gelu(mlp_fc(ln2(h))))  an MLP through 4 * width
//
//   Rng rng(0);
//   Sequential model("gpt");
//   model.Emplace<TransformerBlock>("block0", 64, 4, rng);
//   model.Emplace<TransformerBlock>("block1", 64, 4, rng);
//   // parameters "block0.ln1.weight", "block0.attn.qkv.weight", ...,
//   // "block0.mlp_fc.weight" (GELU fused into its bias add), "block1.mlp_proj.bias"
//
// A container: its children are ln1, attn, ln2, mlp_fc and mlp_proj
// (Children()), so its parameters are theirs under "<name>.", and
// checkpoints, the data-parallel reducer (each child's gradients start
// reducing as soon as that child's Backward has queued them) and traces
// see each of them. The residual sums go to new tensors: a child may have
// kept its output for Backward.
#ifndef TANDEM_LAYERS_TRANSFORMER_BLOCK_H_
#define TANDEM_LAYERS_TRANSFORMER_BLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/attention.h"
#include "layers/layer.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/precision.h"

namespace tandem {

struct TransformerBlockOptions {
  Device device = Device::Cpu();
  Precision precision = Precision::kFp32;
  // The MLP's hidden width is mlp_ratio * width.
  int64_t mlp_ratio = 4;
  float layer_norm_eps = 1e-5f;
  // Of every Linear's weights (the attention's and the MLP's).
  Init init = Init::kXavierUniform;
};

class TransformerBlock : public Layer {
 public:
  // width must be a multiple of heads (MultiHeadSelfAttention). Weights are
  // drawn from `rng` on the host, attention's then the MLP's.
  TransformerBlock(std::string name, int64_t width, int64_t heads, Rng& rng,
                   TransformerBlockOptions options = {});

  // x [batch, T, width] -> y [batch, T, width], in the compute dtype.
  Tensor Forward(const Tensor& x) override { return ForwardWith(x, ForwardArgs()); }
  // Each child through ForwardChild (args.hooks hears of each).
  Tensor ForwardWith(const Tensor& x, const ForwardArgs& args) override;
  // On the main lane, joined.
  Tensor Backward(const Tensor& dy) override;
  // Each child through BackwardChild with the caller's args (lanes,
  // gradient mode, update), last to first; the residual sums of the
  // gradients on args.lane; args.on_params_ready once all have returned.
  // dx undefined when !args.input_grad. Nothing joins args.param_lane.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  std::vector<Layer*> Children() override { return {&ln1_, &attn_, &ln2_, &mlp_fc_, &mlp_proj_}; }
  std::string Name() const override { return name_; }
  // "block0 (TransformerBlock 64, 4 heads)", with the precision when not fp32.
  std::string Describe() const override;

  int64_t width() const { return width_; }
  LayerNorm& ln1() { return ln1_; }
  MultiHeadSelfAttention& attn() { return attn_; }
  LayerNorm& ln2() { return ln2_; }
  Linear& mlp_fc() { return mlp_fc_; }
  Linear& mlp_proj() { return mlp_proj_; }

 private:
  std::string name_;
  int64_t width_;
  TransformerBlockOptions options_;
  LayerNorm ln1_;
  MultiHeadSelfAttention attn_;
  LayerNorm ln2_;
  Linear mlp_fc_;
  Linear mlp_proj_;
  Shape input_shape_;  // of the last Forward; empty when none is pending
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_TRANSFORMER_BLOCK_H_
