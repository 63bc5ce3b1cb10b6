// A check of a layer's full backward protocol (BackwardWith, layers/layer.h)
// against its simple Backward, for the layers that implement it themselves:
//
//   ExpectFullBackwardProtocol([&] { return std::make_unique<LayerNorm>("ln", 5, device); },
//                              x, dy);
//
// `make` builds the same layer each call (same seed). Checked, bitwise, on
// the layer's device: accumulation over two Backwards, on_params_ready once
// per Backward, overwrite mode, no input gradient when none is wanted, and an
// SGD step folded into Backward equal to the step after it.
#ifndef TANDEM_TESTS_SUPPORT_BACKWARD_PROTOCOL_H_
#define TANDEM_TESTS_SUPPORT_BACKWARD_PROTOCOL_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "core/ops.h"
#include "layers/layer.h"
#include "layers/optimizer.h"

namespace tandem {
namespace testing {

inline std::vector<std::vector<float>> GradientValues(Layer& layer) {
  std::vector<std::vector<float>> values;
  for (NamedParameter& p : layer.Parameters()) values.push_back(p.grad().ToVector());
  return values;
}

inline std::vector<std::vector<float>> ParameterValues(Layer& layer) {
  std::vector<std::vector<float>> values;
  for (NamedParameter& p : layer.Parameters()) values.push_back(p.value().ToVector());
  return values;
}

// BackwardWith, then args.lane joined with args.param_lane: what a caller
// reading the results on the main lane does.
inline Tensor JoinedBackwardWith(Layer& layer, const Tensor& dy, const BackwardArgs& args) {
  Tensor dx = layer.BackwardWith(dy, args);
  ops::WaitFor(args.lane, args.param_lane);
  return dx;
}

inline void ExpectFullBackwardProtocol(const std::function<std::unique_ptr<Layer>()>& make,
                                       const Tensor& x, const Tensor& dy) {
  const Device device = dy.device();
  // The simple form, twice: gradients accumulate.
  std::unique_ptr<Layer> simple = make();
  std::vector<float> dx;
  std::vector<std::vector<float>> once;
  for (int step = 0; step < 2; ++step) {
    simple->Forward(x);
    const Tensor g = simple->Backward(dy);
    if (g.defined()) dx = g.ToVector();
    if (step == 0) once = GradientValues(*simple);
  }
  const std::vector<std::vector<float>> twice = GradientValues(*simple);

  for (GradMode mode : {GradMode::kAccumulate, GradMode::kOverwrite}) {
    std::unique_ptr<Layer> full = make();
    BackwardArgs args = BackwardArgs::For(device);
    args.grad_mode = mode;
    int ready = 0;
    args.on_params_ready = [&ready] { ++ready; };
    for (int step = 0; step < 2; ++step) {
      full->Forward(x);
      const Tensor g = JoinedBackwardWith(*full, dy, args);
      EXPECT_EQ(g.defined(), !dx.empty());
      if (g.defined()) {
        EXPECT_EQ(g.ToVector(), dx);
      }
    }
    EXPECT_EQ(ready, 2) << "on_params_ready once per Backward";
    EXPECT_EQ(GradientValues(*full), mode == GradMode::kAccumulate ? twice : once)
        << (mode == GradMode::kAccumulate ? "accumulated" : "overwritten") << " gradients";
  }

  std::unique_ptr<Layer> no_dx = make();
  BackwardArgs args = BackwardArgs::For(device);
  args.input_grad = false;
  no_dx->Forward(x);
  EXPECT_FALSE(JoinedBackwardWith(*no_dx, dy, args).defined());
  EXPECT_EQ(GradientValues(*no_dx), once);

  // SGD inside Backward against SGD after it.
  std::unique_ptr<Layer> after = make(), inside = make();
  Sgd sgd_after(after->Parameters(), SgdParams{0.25f});
  Sgd sgd_inside(inside->Parameters(), SgdParams{0.25f});
  after->Forward(x);
  after->Backward(dy);
  sgd_after.Step();
  BackwardArgs update = BackwardArgs::For(device);
  update.update = sgd_inside.in_backward();
  ASSERT_NE(update.update, nullptr);
  update.grad_mode = GradMode::kOverwrite;
  inside->Forward(x);
  const Tensor g = JoinedBackwardWith(*inside, dy, update);
  if (g.defined()) {
    EXPECT_EQ(g.ToVector(), dx) << "the input gradient reads the old weights";
  }
  sgd_inside.Step();
  EXPECT_EQ(ParameterValues(*inside), ParameterValues(*after)) << "updated in Backward";
}

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_TESTS_SUPPORT_BACKWARD_PROTOCOL_H_
