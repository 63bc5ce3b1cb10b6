#include "data/dataset.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace data {

namespace {

// "features [N, F] float32 on cpu": the expected form, for messages.
void CheckHostFloat(const Tensor& t, const std::string& who, const char* what,
                    int rank, const char* form) {
  TANDEM_CHECK(t.defined()) << who << ": " << what << " is undefined, expected "
                            << form << " float32 on the CPU";
  TANDEM_CHECK(t.rank() == rank && t.dtype() == DType::kFloat32 &&
               t.device().is_cpu())
      << who << ": " << what << " is " << ShapeToString(t.shape()) << " "
      << DTypeName(t.dtype()) << " on " << t.device() << ", expected " << form
      << " float32 on the CPU";
}

}  // namespace

void CheckGatherOutputs(const Dataset& dataset, size_t rows,
                        const Tensor& features, const Tensor& labels) {
  const std::string who = dataset.name() + ": Gather";
  CheckHostFloat(features, who, "features", 2, "[rows, feature_size]");
  CheckHostFloat(labels, who, "labels", 1, "[rows]");
  TANDEM_CHECK(features.dim(1) == dataset.feature_size())
      << who << ": features is " << ShapeToString(features.shape())
      << ", expected rows of " << dataset.feature_size() << " features";
  TANDEM_CHECK(features.dim(0) >= static_cast<int64_t>(rows) &&
               labels.dim(0) >= static_cast<int64_t>(rows))
      << who << ": " << rows << " indices but features is "
      << ShapeToString(features.shape()) << " and labels "
      << ShapeToString(labels.shape()) << ", expected at least " << rows
      << " rows each";
}

TensorDataset::TensorDataset(Tensor features_in, Tensor labels_in,
                             int64_t classes_in, std::string source_in)
    : features(std::move(features_in)),
      labels(std::move(labels_in)),
      classes(classes_in),
      source(std::move(source_in)) {
  CheckHostFloat(features, source, "features", 2, "[N, F]");
  CheckHostFloat(labels, source, "labels", 1, "[N]");
  TANDEM_CHECK(features.dim(0) == labels.dim(0))
      << source << ": " << features.dim(0) << " feature rows ("
      << ShapeToString(features.shape()) << ") but " << labels.dim(0)
      << " labels; expected the same count";
  TANDEM_CHECK(classes >= 1)
      << source << ": num_classes is " << classes << ", expected at least 1";
  const float* y = labels.data();
  for (int64_t i = 0; i < labels.dim(0); ++i) {
    TANDEM_CHECK(y[i] >= 0 && y[i] < classes && std::floor(y[i]) == y[i])
        << source << ": label " << y[i] << " at index " << i
        << " is not a class index: expected a whole number 0 to "
        << classes - 1 << " (num_classes = " << classes << ")";
  }
}

void TensorDataset::Gather(const std::vector<int64_t>& indices,
                           Tensor& features_out, Tensor& labels_out) const {
  CheckGatherOutputs(*this, indices.size(), features_out, labels_out);
  const int64_t n = size();
  // Every index is checked before anything is written.
  for (size_t i = 0; i < indices.size(); ++i) {
    TANDEM_CHECK(indices[i] >= 0 && indices[i] < n)
        << source << ": Gather: indices[" << i << "] is " << indices[i]
        << ", expected 0 to " << n - 1 << " (the dataset has " << n
        << " examples)";
  }
  const int64_t width = feature_size();
  const float* x = features.data();
  const float* y = labels.data();
  float* x_out = features_out.mutable_data();
  float* y_out = labels_out.mutable_data();
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(x_out + i * width, x + indices[i] * width,
                width * sizeof(float));
    y_out[i] = y[indices[i]];
  }
}

}  // namespace data
}  // namespace tandem
