#include "data/normalize.h"

#include <cmath>

#include "core/check.h"

namespace tandem {
namespace data {

Normalization ComputeNormalization(const Tensor& images) {
  TANDEM_CHECK(images.defined() && images.numel() > 0)
      << "ComputeNormalization: images are empty";
  TANDEM_CHECK(images.device().is_cpu())
      << "ComputeNormalization: images are on " << images.device()
      << ", expected cpu (normalise before copying batches to a device)";
  const float* x = images.data();
  const int64_t n = images.numel();
  // Two passes rather than sum and sum-of-squares: the one-pass formula
  // cancels catastrophically when the mean is large relative to stddev.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / n;
  double squares = 0.0;
  for (int64_t i = 0; i < n; ++i) squares += (x[i] - mean) * (x[i] - mean);
  const double stddev = std::sqrt(squares / n);
  Normalization norm;
  norm.mean = static_cast<float>(mean);
  norm.stddev = stddev > 0.0 ? static_cast<float>(stddev) : 1.f;
  return norm;
}

void Normalize(const Normalization& norm, Tensor& images) {
  TANDEM_CHECK(norm.stddev > 0.f && std::isfinite(norm.stddev) &&
               std::isfinite(norm.mean))
      << "Normalize: mean " << norm.mean << " and stddev " << norm.stddev
      << " are invalid; expected finite values and stddev > 0";
  TANDEM_CHECK(images.defined()) << "Normalize: images are undefined";
  TANDEM_CHECK(images.device().is_cpu())
      << "Normalize: images are on " << images.device()
      << ", expected cpu (normalise before copying batches to a device)";
  float* x = images.data();
  const float inverse = 1.f / norm.stddev;
  for (int64_t i = 0; i < images.numel(); ++i) {
    x[i] = (x[i] - norm.mean) * inverse;
  }
}

}  // namespace data
}  // namespace tandem
