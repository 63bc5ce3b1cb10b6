#include "trainer/objective.h"

#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {
namespace {

// Model output [B, T, V] and labels [B, T] (or [B] where T is 1) as the
// [B*T, V] logits and [B*T] labels of a classification. A model that
// predicts one next token per example gives [B, V] for labels [B].
struct Flattened {
  Tensor logits, labels;
  int64_t positions;
};

Flattened FlattenSequence(const Tensor& output, const Tensor& labels) {
  if (output.rank() == 2 && labels.rank() == 1 && output.dim(0) == labels.dim(0)) {
    return {output, labels, 1};
  }
  TANDEM_CHECK(output.rank() == 3 && labels.numel() == output.dim(0) * output.dim(1))
      << "next-token objective: the model's output is " << ShapeToString(output.shape())
      << " and the labels " << ShapeToString(labels.shape())
      << "; expected an output [batch, positions, vocabulary] and labels [batch, positions]";
  const int64_t rows = output.dim(0) * output.dim(1);
  return {output.Reshape({rows, output.dim(2)}), labels.Reshape({rows}), output.dim(1)};
}

// Softmax cross-entropy at every position: the mean over examples of the
// sum over positions, divided by the positions, is the mean per token.
class NextTokenLoss : public Loss {
 public:
  Tensor Forward(const Tensor& output, const Tensor& labels, int64_t examples) override {
    Flattened flat = FlattenSequence(output, labels);
    output_shape_ = output.shape();
    return loss_.Forward(flat.logits, flat.labels,
                         examples > 0 ? examples * flat.positions : 0);
  }
  Tensor Backward() override { return loss_.Backward().Reshape(output_shape_); }
  std::string Name() const override { return "next_token_cross_entropy"; }

 private:
  SoftmaxCrossEntropyLoss loss_;
  Shape output_shape_;
};

// MSE of the output against labels of as many values ([B] labels against a
// [B, 1] output, say).
class RegressionLoss : public Loss {
 public:
  Tensor Forward(const Tensor& output, const Tensor& labels, int64_t examples) override {
    TANDEM_CHECK(output.numel() == labels.numel() && output.rank() >= 1 &&
                 output.dim(0) == labels.dim(0))
        << "regression objective: the model's output is " << ShapeToString(output.shape())
        << " but the labels are " << ShapeToString(labels.shape())
        << "; expected one output value per label value";
    return loss_.Forward(output, labels.Reshape(output.shape()), examples);
  }
  Tensor Backward() override { return loss_.Backward(); }
  std::string Name() const override { return "mse"; }

 private:
  MseLoss loss_;
};

void CheckClassIds(const data::Dataset& dataset, const std::string& objective) {
  TANDEM_CHECK(dataset.num_classes() >= 1)
      << dataset.name() << ": the " << objective
      << " objective needs class (or token) ids as labels, but the dataset's labels are "
         "real-valued (num_classes 0); use Regression()";
}

class ClassificationObjective : public Objective {
 public:
  std::string Name() const override { return "classification"; }
  void CheckData(const data::Dataset& dataset) const override {
    CheckClassIds(dataset, Name());
    TANDEM_CHECK(dataset.label_size() == 1)
        << dataset.name() << ": the classification objective needs one class id per "
        << "example, but each label has " << dataset.label_size()
        << " values; use NextToken() for sequences";
  }
  std::unique_ptr<Loss> NewLoss() const override {
    return std::make_unique<SoftmaxCrossEntropyLoss>();
  }
  bool HasAccuracy() const override { return true; }
};

class NextTokenObjective : public Objective {
 public:
  std::string Name() const override { return "next-token"; }
  void CheckData(const data::Dataset& dataset) const override { CheckClassIds(dataset, Name()); }
  std::unique_ptr<Loss> NewLoss() const override { return std::make_unique<NextTokenLoss>(); }
  bool HasAccuracy() const override { return true; }
  void CountCorrect(const Tensor& output, const Tensor& labels, Tensor& scratch,
                    Tensor& correct) const override {
    Flattened flat = FlattenSequence(output, labels);
    Objective::CountCorrect(flat.logits, flat.labels, scratch, correct);
  }
  int64_t PredictionsPerExample(const data::Dataset& dataset) const override {
    return dataset.label_size();
  }
};

class RegressionObjective : public Objective {
 public:
  std::string Name() const override { return "regression"; }
  void CheckData(const data::Dataset& dataset) const override { (void)dataset; }
  std::unique_ptr<Loss> NewLoss() const override { return std::make_unique<RegressionLoss>(); }
  bool HasAccuracy() const override { return false; }
  void CountCorrect(const Tensor&, const Tensor&, Tensor&, Tensor&) const override {
    TANDEM_CHECK(false) << "the regression objective has no accuracy";
  }
};

}  // namespace

void Objective::CountCorrect(const Tensor& output, const Tensor& labels, Tensor& scratch,
                             Tensor& correct) const {
  ops::CountCorrect(output, labels, scratch);
  ops::Axpy(1.f, scratch, correct);
}

int64_t Objective::PredictionsPerExample(const data::Dataset& dataset) const {
  (void)dataset;
  return 1;
}

std::shared_ptr<const Objective> Classification() {
  return std::make_shared<ClassificationObjective>();
}

std::shared_ptr<const Objective> NextToken() { return std::make_shared<NextTokenObjective>(); }

std::shared_ptr<const Objective> Regression() { return std::make_shared<RegressionObjective>(); }

}  // namespace tandem
