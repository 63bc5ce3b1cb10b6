// Trains a model that mixes a user-defined layer (LowRankLinear) with
// built-in ones, on a synthetic 4-class problem, and prints the accuracy.
//
//   bazel run //examples:custom_layer
#include <iostream>

#include "core/ops.h"
#include "core/rng.h"
#include "examples/custom_layer/low_rank_linear.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"

using namespace tandem;

int main() {
  Rng rng(7);
  // Points in 8-D; the class is the quadrant of their first two coordinates.
  const int64_t n = 512;
  std::vector<float> xs(n * 8), ys(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 8; ++j) xs[i * 8 + j] = rng.Normal();
    ys[i] = static_cast<float>((xs[i * 8] > 0) * 2 + (xs[i * 8 + 1] > 0));
  }
  Tensor x = Tensor::FromVector(xs, {n, 8}), y = Tensor::FromVector(ys, {n});

  Sequential model;
  model.Add(std::make_unique<example::LowRankLinear>("low_rank", 8, 32, 4, rng));
  model.Add(MakeTanh("act"));
  model.Emplace<Linear>("head", 32, 4, rng);
  AdamWParams adam;
  adam.lr = 0.02f;
  AdamW optimizer(model.Parameters(), adam);
  SoftmaxCrossEntropyLoss loss;
  for (int step = 0; step < 300; ++step) {
    optimizer.ZeroGrad();
    const float value = loss.Forward(model.Forward(x), y).Item();
    model.Backward(loss.Backward());
    optimizer.Step();
    if (step % 100 == 0) std::cout << "step " << step << " loss " << value << "\n";
  }
  Tensor correct = Tensor::Empty({1});
  ops::CountCorrect(model.Forward(x), y, correct);
  std::cout << "accuracy=" << correct.Item() / n << std::endl;
  return 0;
}
