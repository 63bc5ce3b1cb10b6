// Embedding: a table of `vocab` rows of `dim` features, looked up by index.
// The input is [batch, context] float32 token indices (whole numbers in
// [0, vocab)); the output is each position's row, concatenated per example:
// [batch, context * dim], what a Bengio-style MLP language model feeds to a
// Linear. PyTorch's nn.Embedding's parameter name, shape and N(0, 1) init.
//
//   Rng rng(0);
//   Embedding emb("emb", 27, 10, rng, device);   // emb.weight [27, 10]
//   Tensor h = emb.Forward(tokens);              // [32, 3] -> [32, 30]
//   emb.Backward(dh);                            // adds into emb.weight's grad
//
// A transformer wants a row per position instead, [batch, context, dim]:
// EmbeddingOptions::per_position gives that shape (the same elements, a
// view), which N-d layers (Linear, LayerNorm, attention) take as it is.
//
// The input is data, so there is no input gradient: Backward returns an
// undefined Tensor whatever BackwardArgs::input_grad asks, and belongs first
// in a model. A bad index throws on the CPU, naming the layer, the position
// and the value; on a GPU (where a kernel cannot throw) its output row is
// NaN, which the loss then shows (ops::TrackNonFinite).
#ifndef TANDEM_LAYERS_EMBEDDING_H_
#define TANDEM_LAYERS_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/precision.h"
#include "layers/saved_tensor.h"

namespace tandem {

struct EmbeddingOptions {
  // bf16: a bfloat16 working copy of the table and bfloat16 outputs where
  // the device multiplies bfloat16; the float32 master and gradient stay
  // (layers/precision.h).
  Precision precision = Precision::kFp32;
  // Output [batch, context, dim] (a transformer's tokens) instead of
  // [batch, context * dim]; Backward then takes dy of that shape.
  bool per_position = false;
};

class Embedding : public Layer {
 public:
  // The table is drawn from `rng` on the host, N(0, 1), so the same seed
  // gives the same table on every device and every rank.
  Embedding(std::string name, int64_t vocab, int64_t dim, Rng& rng, Device device,
            EmbeddingOptions options = {});

  // x [batch, context] float32 indices -> [batch, context * dim] (or
  // [batch, context, dim] with per_position), in the compute dtype.
  Tensor Forward(const Tensor& x) override;
  // dy [batch, context * dim] (or [batch, context, dim] with per_position):
  // adds row i of dy (as [batch * context, dim])
  // into the gradient of row x[i] of the table, repeated indices adding up.
  // Returns an undefined Tensor: indices have no gradient.
  Tensor Backward(const Tensor& dy) override;
  // The full protocol (layers/layer.h), on args.lane: the table's gradient,
  // then args.on_params_ready.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  // "<name>.weight", [vocab, dim].
  std::vector<NamedParameter> Parameters() override;
  std::string Name() const override { return name_; }
  // "emb (Embedding 27×10)", with the precision when not fp32.
  std::string Describe() const override;

  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return dim_; }
  Tensor& weight() { return weight_.value(); }

 private:
  // On the CPU: throws, naming the layer, the first position of x whose
  // value is not a whole number in [0, vocab).
  void CheckIndicesOnHost(const Tensor& x) const;
  // What Forward returns for indices [batch, context].
  Shape OutputShape(int64_t batch, int64_t context) const;
  // The dtype of activations and working copies on the table's device.
  DType compute_dtype() const { return policy_.compute_dtype(weight_.value().backend()); }
  bool has_working_copies() const { return policy_.has_working_copies(weight_.value().backend()); }
  const Tensor& weight_for_math() const { return has_working_copies() ? weight_.working() : weight_.value(); }

  std::string name_;
  int64_t vocab_;
  int64_t dim_;
  EmbeddingOptions options_;
  PrecisionPolicy policy_;
  // [vocab, dim], float32, with a bfloat16 working copy under bf16 (may be a
  // placeholder).
  Parameter weight_;
  SavedTensor indices_{"input indices"};  // [batch, context], from the last Forward
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_EMBEDDING_H_
