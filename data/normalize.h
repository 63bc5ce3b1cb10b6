// Global input normalisation: one mean and one standard deviation for all
// pixels, computed on the training set and applied to every split, so the
// model sees inputs of mean ~0 and variance ~1 whichever split it reads.
//
// The statistics are summed in double in index order, so every process that
// loads the same data computes bit-identical values (data-parallel workers
// must normalise alike).
//
//   Normalization norm = ComputeNormalization(train.features);
//   Normalize(norm, train.features); // in place: (x - mean) / stddev
//   Normalize(norm, test.features);  // the training set's statistics
#ifndef TANDEM_DATA_NORMALIZE_H_
#define TANDEM_DATA_NORMALIZE_H_

#include "core/tensor.h"

namespace tandem {
namespace data {

struct Normalization {
  float mean = 0.f;
  float stddev = 1.f;
};

// Mean and population standard deviation of all elements of a CPU tensor.
// A constant tensor has stddev 0; 1 is returned instead, so normalising
// centres it rather than dividing by zero.
Normalization ComputeNormalization(const Tensor& images);

// images = (images - mean) / stddev, in place, on a CPU tensor.
void Normalize(const Normalization& norm, Tensor& images);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_NORMALIZE_H_
