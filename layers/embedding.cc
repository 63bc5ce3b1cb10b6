#include "layers/embedding.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Embedding::Embedding(std::string name, int64_t vocab, int64_t dim, Rng& rng, Device device,
                     EmbeddingOptions options)
    : name_(std::move(name)), vocab_(vocab), dim_(dim), options_(options) {
  TANDEM_CHECK(vocab_ > 0 && dim_ > 0)
      << "layer '" << name_ << "': Embedding sizes must be positive, got vocab " << vocab_
      << " and dim " << dim_;
  // Float32 indices name rows exactly up to 2^24 (core/ops_math.h).
  TANDEM_CHECK(vocab_ <= (int64_t{1} << 24))
      << "layer '" << name_ << "': vocab " << vocab_
      << " exceeds 2^24 = 16777216, the rows float32 indices name exactly";
  policy_.precision = options.precision;
  std::vector<float> table(static_cast<size_t>(vocab_ * dim_));
  for (float& v : table) v = rng.Normal(0.f, 1.f);
  weight_ = Parameter(Tensor::FromVector(table, {vocab_, dim_}, device));
  if (policy_.bf16()) {
    // A placeholder, kept where Parameters() hands it out (Note [bf16 where
    // the device does not multiply bfloat16] in layers/precision.h).
    weight_.KeepWorkingCopy(DType::kBFloat16);
    SyncWorkingCopies(*this);
  }
}

std::string Embedding::Describe() const {
  std::ostringstream out;
  out << name_ << " (Embedding " << vocab_ << "×" << dim_;
  if (options_.precision != Precision::kFp32) out << ", " << PrecisionName(options_.precision);
  out << ")";
  return out.str();
}

std::vector<NamedParameter> Embedding::Parameters() {
  return {{name_ + ".weight", &weight_, has_working_copies()}};
}

void Embedding::CheckIndicesOnHost(const Tensor& x) const {
  const float* v = x.data();
  const int64_t context = x.dim(1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float index = v[i];
    const bool ok = index >= 0.f && index < static_cast<float>(vocab_) &&
                    std::floor(index) == index;
    TANDEM_CHECK(ok) << "layer '" << name_ << "' (Embedding " << vocab_ << "×" << dim_
                     << "): input position [" << i / context << ", " << i % context
                     << "] holds index " << index << ", not a whole number in [0, "
                     << vocab_ << "): the vocabulary has " << vocab_ << " rows";
  }
}

Tensor Embedding::Forward(const Tensor& x) {
  TANDEM_CHECK(x.rank() == 2)
      << "layer '" << name_ << "' (Embedding " << vocab_ << "×" << dim_ << ") got input "
      << ShapeToString(x.shape()) << ": expected [batch, context] token indices";
  TANDEM_CHECK(x.dtype() == DType::kFloat32)
      << "layer '" << name_ << "' (Embedding " << vocab_ << "×" << dim_
      << ") got indices of dtype " << DTypeName(x.dtype())
      << ": expected float32 whole numbers (bfloat16 cannot hold most indices exactly)";
  TANDEM_CHECK(x.device() == weight_.value().device())
      << "layer '" << name_ << "' has parameters on " << weight_.value().device()
      << " but got input on " << x.device();
  if (x.device().is_cpu()) CheckIndicesOnHost(x);
  const int64_t batch = x.dim(0), context = x.dim(1);
  Tensor rows = Tensor::Empty({batch * context, dim_}, x.device(), compute_dtype());
  ops::GatherRows(weight_for_math(), x.Reshape({batch * context}), rows);
  indices_.Save(x);
  return rows.Reshape(OutputShape(batch, context));
}

Shape Embedding::OutputShape(int64_t batch, int64_t context) const {
  if (options_.per_position) return {batch, context, dim_};
  return {batch, context * dim_};
}

Tensor Embedding::Backward(const Tensor& dy) {
  return BackwardWith(dy, BackwardArgs::For(dy.device()));
}

// The input is data: only the table's gradient, on args.lane, then
// on_params_ready.
Tensor Embedding::BackwardWith(const Tensor& dy, const BackwardArgs& args) {
  const Tensor& x = indices_.Get(*this);
  const int64_t n = x.numel();
  const Shape expected = OutputShape(x.dim(0), x.dim(1));
  TANDEM_CHECK(dy.shape() == expected)
      << "layer '" << name_ << "' (Embedding " << vocab_ << "×" << dim_
      << ") got output gradient " << ShapeToString(dy.shape()) << ": expected "
      << ShapeToString(expected);
  TANDEM_CHECK(dy.device() == x.device())
      << "layer '" << name_ << "' ran Forward on " << x.device()
      << " but got an output gradient on " << dy.device();
  const Lane& lane = args.lane;
  // The gradient starts from zero unless it accumulates; one left undefined
  // (an update folded into an earlier backward) is made again, as Linear does.
  if (!weight_.grad().defined()) {
    weight_.grad() = Tensor::Zeros(weight_.value().shape(), weight_.value().device());
  } else if (args.update != nullptr || args.grad_mode == GradMode::kOverwrite) {
    ops::Fill(lane, weight_.grad(), 0.f);
  }
  ops::ScatterAddRows(lane, dy.Reshape({n, dim_}), x.Reshape({n}), weight_.grad());
  if (args.update != nullptr) args.update->FromGradient(lane, weight_, weight_.grad());
  if (args.on_params_ready) args.on_params_ready();
  indices_.Reset();
  return Tensor();
}

}  // namespace tandem
