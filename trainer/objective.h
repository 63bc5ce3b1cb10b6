// What the Trainer optimises and reports: what a batch's labels are, the
// loss, and the metric (trainer/trainer.h, TrainTask::objective).
//
//   TrainTask task;
//   task.objective = Classification();  // labels [B] class ids, model out [B, C]
//   task.objective = NextToken();       // labels [B, T] token ids, model out [B, T, V]
//                                       // (or [B] and [B, V]: one next token)
//   task.objective = Regression();      // labels [B] or [B, L] values, model out alike
//
// Classification and next-token prediction report an accuracy (of examples;
// of tokens); regression reports its loss (mean squared error) only. A
// user's objective implements the same interface.
#ifndef TANDEM_TRAINER_OBJECTIVE_H_
#define TANDEM_TRAINER_OBJECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "data/dataset.h"
#include "layers/loss.h"

namespace tandem {

class Objective {
 public:
  virtual ~Objective() = default;
  // "classification": for logs and errors.
  virtual std::string Name() const = 0;
  // Throws tandem::Error naming the dataset, the objective and what does
  // not fit, where `dataset`'s labels cannot be scored this way.
  virtual void CheckData(const data::Dataset& dataset) const = 0;
  // A loss for one worker: Forward(model output, labels, examples) with
  // labels as Gather writes them (data::LabelShape), normalised by
  // `examples` whole examples.
  virtual std::unique_ptr<Loss> NewLoss() const = 0;
  // Whether the objective reports an accuracy (train_acc, test_acc).
  virtual bool HasAccuracy() const = 0;
  // Adds to `correct` ([1] on the output's device) how many of `labels`'
  // values the output predicts; `scratch` is a [1] tensor there.
  virtual void CountCorrect(const Tensor& output, const Tensor& labels, Tensor& scratch,
                            Tensor& correct) const;
  // How many predictions one example's accuracy counts: 1, or the tokens of
  // its sequence.
  virtual int64_t PredictionsPerExample(const data::Dataset& dataset) const;
};

// Softmax cross-entropy over C classes; accuracy of the argmax.
std::shared_ptr<const Objective> Classification();
// Softmax cross-entropy at every position of a sequence, in nats per token;
// accuracy over tokens.
std::shared_ptr<const Objective> NextToken();
// Mean squared error over every label value; no accuracy.
std::shared_ptr<const Objective> Regression();

}  // namespace tandem

#endif  // TANDEM_TRAINER_OBJECTIVE_H_
