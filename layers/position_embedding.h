// PositionEmbedding: a learned position table added to a sequence, GPT-2's
// wpe. x [batch, T, dim] -> x + table[0..T) on every example, for T up to
// the table's `max_positions` rows.
//
//   Rng rng(0);
//   EmbeddingOptions per_position;
//   per_position.per_position = true;                    // [batch, T, 64] out
//   Embedding tokens("tok", 65, 64, rng, device, per_position);
//   PositionEmbedding positions("pos", 256, 64, rng, device);  // pos.weight [256, 64]
//   Tensor h = positions.Forward(tokens.Forward(ids));   // ids [batch, T] -> [batch, T, 64]
//   Tensor dh = positions.Backward(dy);                  // dy itself; adds into pos.weight's grad
//
// The sum is one broadcast over the batch ([batch, T * dim] plus the
// table's first T rows as one row), into a new tensor; Backward adds the
// batch's column sums of dy into the first T rows of the gradient and
// returns dy as the input gradient (no copy). Precision as for Embedding:
// in bf16 a bfloat16 working copy of the table where the device multiplies
// bfloat16 (layers/precision.h).
#ifndef TANDEM_LAYERS_POSITION_EMBEDDING_H_
#define TANDEM_LAYERS_POSITION_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/precision.h"

namespace tandem {

struct PositionEmbeddingOptions {
  // The table is drawn from N(0, init_std^2) (GPT-2's 0.02 by default).
  float init_std = 0.02f;
  Precision precision = Precision::kFp32;
};

class PositionEmbedding : public Layer {
 public:
  // The table is drawn from `rng` on the host, so the same seed gives the
  // same table on every device and every rank.
  PositionEmbedding(std::string name, int64_t max_positions, int64_t dim, Rng& rng,
                    Device device, PositionEmbeddingOptions options = {});

  // x [batch, T, dim] with 0 < T <= max_positions -> x + table[0..T), a new
  // tensor in the compute dtype.
  Tensor Forward(const Tensor& x) override;
  // dy [batch, T, dim]: adds its sums over the batch into the gradient of
  // table[0..T); returns dy (in the compute dtype) as the input gradient.
  Tensor Backward(const Tensor& dy) override;
  // The full protocol (layers/layer.h), on args.lane: the table's gradient,
  // then args.on_params_ready.
  Tensor BackwardWith(const Tensor& dy, const BackwardArgs& args) override;
  // "<name>.weight", [max_positions, dim].
  std::vector<NamedParameter> Parameters() override;
  std::string Name() const override { return name_; }
  // "pos (PositionEmbedding 256×64)", with the precision when not fp32.
  std::string Describe() const override;

  int64_t max_positions() const { return max_positions_; }
  int64_t dim() const { return dim_; }
  Tensor& weight() { return weight_.value(); }

 private:
  DType compute_dtype() const { return policy_.compute_dtype(weight_.value().backend()); }
  bool has_working_copies() const { return policy_.has_working_copies(weight_.value().backend()); }
  const Tensor& weight_for_math() const { return has_working_copies() ? weight_.working() : weight_.value(); }

  std::string name_;
  int64_t max_positions_;
  int64_t dim_;
  PositionEmbeddingOptions options_;
  PrecisionPolicy policy_;
  // [max_positions, dim], float32, with a bfloat16 working copy under bf16
  // (may be a placeholder).
  Parameter weight_;
  Shape input_shape_;            // of the last Forward; empty when none is pending
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_POSITION_EMBEDDING_H_
