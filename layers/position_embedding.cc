#include "layers/position_embedding.h"

#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

PositionEmbedding::PositionEmbedding(std::string name, int64_t max_positions, int64_t dim,
                                     Rng& rng, Device device, PositionEmbeddingOptions options)
    : name_(std::move(name)), max_positions_(max_positions), dim_(dim), options_(options) {
  TANDEM_CHECK(max_positions_ > 0 && dim_ > 0)
      << "layer '" << name_ << "': PositionEmbedding sizes must be positive, got "
      << max_positions_ << " positions of dim " << dim_;
  policy_.precision = options.precision;
  std::vector<float> table(static_cast<size_t>(max_positions_ * dim_));
  for (float& v : table) v = rng.Normal(0.f, options.init_std);
  weight_ = Parameter(Tensor::FromVector(table, {max_positions_, dim_}, device));
  if (policy_.bf16()) {
    // A placeholder, kept where Parameters() hands it out (Note [bf16 where
    // the device does not multiply bfloat16] in layers/precision.h).
    weight_.KeepWorkingCopy(DType::kBFloat16);
    SyncWorkingCopies(*this);
  }
}

std::string PositionEmbedding::Describe() const {
  std::ostringstream out;
  out << name_ << " (PositionEmbedding " << max_positions_ << "×" << dim_;
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

std::vector<NamedParameter> PositionEmbedding::Parameters() {
  return {{name_ + ".weight", &weight_, has_working_copies()}};
}

Tensor PositionEmbedding::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() == 3 && x.dim(1) > 0 && x.dim(1) <= max_positions_ && x.dim(2) == dim_)
      << "layer '" << name_ << "' (PositionEmbedding " << max_positions_ << "×" << dim_
      << ") got input " << ShapeToString(x.shape()) << ": expected [batch, T, " << dim_
      << "] with 0 < T <= " << max_positions_ << " (the positions the table holds)";
  TANDEM_CHECK(x.device() == weight_.value().device())
      << "layer '" << name_ << "' has parameters on " << weight_.value().device()
      << " but got input on " << x.device();
  const int64_t batch = x.dim(0), T = x.dim(1);
  const Tensor input = ops::ToDType(x, compute_dtype()).Reshape({batch, T * dim_});
  // The first T rows of the table, one row of T * dim: a view.
  const Tensor rows = weight_for_math().Slice(0, T).Reshape({T * dim_});
  Tensor y = Tensor::Empty({batch, T * dim_}, x.device(), compute_dtype());
  ops::BroadcastAdd(input, rows, Broadcast::kRow, y);
  input_shape_ = x.shape();
  return y.Reshape(x.shape());
}

Tensor PositionEmbedding::Backward(const Tensor& dy) {
  return BackwardWith(dy, BackwardArgs::For(dy.device()));
}

// On args.lane, as LayerNorm: the table's gradient, an update from it where
// asked, then on_params_ready.
Tensor PositionEmbedding::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  TANDEM_CHECK(!input_shape_.empty())
      << "layer " << Describe() << ": Backward without a Forward before it (each Forward "
      << "allows one Backward)";
  TANDEM_CHECK(dy.shape() == input_shape_)
      << "layer '" << name_ << "' (PositionEmbedding " << max_positions_ << "×" << dim_
      << ") got output gradient " << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(input_shape_);
  TANDEM_CHECK(dy.device() == weight_.value().device())
      << "layer '" << name_ << "' has parameters on " << weight_.value().device()
      << " but got an output gradient on " << dy.device();
  const Lane& lane = args.lane;
  const int64_t batch = dy.dim(0), T = dy.dim(1);
  input_shape_.clear();
  // Rows T and beyond get no gradient: they are zeroed where the gradient
  // is written rather than added to; one left undefined (an update folded
  // into an earlier backward) is made again, as Linear does.
  if (!weight_.grad().defined()) {
    weight_.grad() = Tensor::Zeros(weight_.value().shape(), weight_.value().device());
  } else if (args.update != nullptr || args.grad_mode == GradMode::kOverwrite) {
    ops::Fill(lane, weight_.grad(), 0.f);
  }
  Tensor used = weight_.grad().Slice(0, T).Reshape({T * dim_});
  ops::ColumnSums(lane, dy.Reshape({batch, T * dim_}), used, /*beta=*/1.f);
  if (args.update != nullptr) args.update->FromGradient(lane, weight_, weight_.grad());
  if (args.on_params_ready) args.on_params_ready();
  if (!args.input_grad) return Tensor();
  return ops::ToDType(lane, dy, compute_dtype());
}

}  // namespace tandem
