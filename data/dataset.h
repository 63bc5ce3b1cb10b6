// Datasets: labelled examples on the host, read a batch of rows at a time.
//
// A Dataset is size() examples, each a row of feature_size() float32
// features and a label of label_size() float32 values: a class index in
// 0..num_classes()-1 (classification), a sequence of next tokens (each in
// 0..num_classes()-1), or real-valued targets (regression, num_classes()
// 0). Training code reads it only through Gather, so a dataset may hold its
// rows in memory (TensorDataset), map them from a file or decode them on the
// fly.
//
//   TensorDataset train = LoadFashionMnist(kDefaultFashionMnistDir, true);
//   Tensor x = Tensor::Empty({64, train.feature_size()});   // CPU
//   Tensor y = Tensor::Empty({64});
//   train.Gather({7, 3, 12}, x, y);     // x[0:3, :] and y[0:3] written
//
// A dataset of your own overrides the five methods; Gather may be called
// from a background thread (data/prefetcher.h), one call at a time.
#ifndef TANDEM_DATA_DATASET_H_
#define TANDEM_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem {
namespace data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t feature_size() const = 0;
  // Labels are 0..num_classes()-1, stored as float32; 0: real-valued.
  virtual int64_t num_classes() const = 0;
  // Values in one example's label. Label tensors are [rows] where it is 1,
  // else [rows, label_size()] (LabelShape).
  virtual int64_t label_size() const { return 1; }
  // For logs and errors, e.g. the file the data came from.
  virtual std::string name() const = 0;
  // features[i, :] and labels[i] = example indices[i], for the first
  // indices.size() rows of host (CPU) float32 tensors of at least that many
  // rows ([rows, feature_size()] and LabelShape(*this, rows)); later rows
  // are left alone.
  // Throws tandem::Error naming name() for an index out of range or a
  // tensor of the wrong shape, dtype or device.
  virtual void Gather(const std::vector<int64_t>& indices, Tensor& features,
                      Tensor& labels) const = 0;
};

// The shape of `rows` examples' labels: [rows], or [rows, label_size()].
Shape LabelShape(const Dataset& dataset, int64_t rows);

// Checks Gather's destination tensors for `dataset` and `rows` indices;
// throws naming dataset.name() and the tensor. For Dataset implementations.
void CheckGatherOutputs(const Dataset& dataset, size_t rows,
                        const Tensor& features, const Tensor& labels);

// Features and labels held as host tensors.
struct TensorDataset final : Dataset {
  Tensor features;     // [N, F] float32, CPU
  Tensor labels;       // [N] or [N, L] float32, CPU: class indices in
                       // [0, classes), or any values where classes is 0
  int64_t classes = 0;
  std::string source;  // what name() returns

  TensorDataset() = default;
  // Checks that the shapes agree, both tensors are float32 on the CPU,
  // classes >= 0, and, where classes >= 1, that every label value is a
  // whole number in [0, classes); throws naming `source` otherwise.
  TensorDataset(Tensor features, Tensor labels, int64_t classes,
                std::string source);

  int64_t size() const override { return labels.defined() ? labels.dim(0) : 0; }
  int64_t feature_size() const override {
    return features.defined() ? features.dim(1) : 0;
  }
  int64_t num_classes() const override { return classes; }
  int64_t label_size() const override {
    return labels.defined() && labels.rank() == 2 ? labels.dim(1) : 1;
  }
  std::string name() const override { return source; }
  void Gather(const std::vector<int64_t>& indices, Tensor& features_out,
              Tensor& labels_out) const override;
};

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_DATASET_H_
