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

Shape LabelShape(const Dataset& dataset, int64_t rows) {
  const int64_t width = dataset.label_size();
  if (width == 1) return {rows};
  return {rows, width};
}

void CheckGatherOutputs(const Dataset& dataset, size_t rows,
                        const Tensor& features, const Tensor& labels) {
  const std::string who = dataset.name() + ": Gather";
  CheckHostFloat(features, who, "features", 2, "[rows, feature_size]");
  const int64_t width = dataset.label_size();
  if (width == 1) {
    CheckHostFloat(labels, who, "labels", 1, "[rows]");
  } else {
    const std::string form = "[rows, " + std::to_string(width) + "]";
    CheckHostFloat(labels, who, "labels", 2, form.c_str());
    TANDEM_CHECK(labels.dim(1) == width)
        << who << ": labels is " << ShapeToString(labels.shape()) << ", expected " << form;
  }
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
  TANDEM_CHECK(labels.defined() && (labels.rank() == 1 || labels.rank() == 2))
      << source << ": labels is " << (labels.defined() ? ShapeToString(labels.shape()) : "undefined")
      << ", expected [N] or [N, L] float32 on the CPU";
  CheckHostFloat(labels, source, "labels", labels.rank(), labels.rank() == 1 ? "[N]" : "[N, L]");
  TANDEM_CHECK(features.dim(0) == labels.dim(0))
      << source << ": " << features.dim(0) << " feature rows ("
      << ShapeToString(features.shape()) << ") but " << labels.dim(0)
      << " labels; expected the same count";
  TANDEM_CHECK(classes >= 0)
      << source << ": num_classes is " << classes
      << ", expected at least 1 (class indices) or 0 (real-valued labels)";
  if (classes == 0) return;
  const float* y = labels.data();
  const int64_t width = label_size();
  for (int64_t i = 0; i < labels.numel(); ++i) {
    TANDEM_CHECK(y[i] >= 0 && y[i] < classes && std::floor(y[i]) == y[i])
        << source << ": label " << y[i] << " at "
        << (width == 1 ? "index " + std::to_string(i)
                       : "[" + std::to_string(i / width) + ", " + std::to_string(i % width) + "]")
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
  const int64_t width = feature_size(), label_width = label_size();
  const float* x = features.data();
  const float* y = labels.data();
  float* x_out = features_out.mutable_data();
  float* y_out = labels_out.mutable_data();
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(x_out + i * width, x + indices[i] * width,
                width * sizeof(float));
    std::memcpy(y_out + i * label_width, y + indices[i] * label_width,
                label_width * sizeof(float));
  }
}

}  // namespace data
}  // namespace tandem
