// Finite-difference gradient checks for layers and losses: does a layer's
// Backward agree with its Forward? For the tests of your own layers, as for
// Tandem's (docs/custom_layers.md, "Checking its gradients"). It needs no test
// framework: the check returns what it found and `Require` throws
// tandem::Error, naming the tensor and its worst element, when the gradients
// are off. From another workspace the target is @tandem//layers:gradient_check.
//
//   #include "layers/gradient_check.h"
//
//   MyLayer layer("mine", 8);
//   Tensor x = Tensor::FromVector(values, {4, 8});  // a small batch
//   tandem::CompareLayerGradients(layer, x).Require(1e-2);   // throws if off
//
// or, in a GoogleTest test, with the message on failure:
//
//   const tandem::GradCheckResult r = tandem::CompareLayerGradients(layer, x);
//   EXPECT_LE(r.max_error(), 1e-2) << r.worst();
//   EXPECT_LT(tandem::CheckLayerGradients(layer, x), 1e-2);  // the number only
//
// The layer is probed through L = sum(Forward(x) * r) for a fixed random r,
// so dL/dy = r: Backward(r) gives the analytic gradients of L, for the input
// and, added into the zeroed gradients, for every parameter. The numeric
// ones are central differences of L, (L(v + step) - L(v - step)) / 2 step,
// for at most GradCheckOptions::max_probes evenly spaced elements of each
// tensor. A tensor's relative error is ||numeric - analytic|| /
// max(||numeric||, ||analytic||) over its probed elements: 0 is perfect,
// 1 or more is a wrong or missing gradient. In float32, with the default
// step, a correct layer stays well below 1e-2, the tolerance Tandem's tests
// use; rounding in Forward grows the error as the step shrinks. A kink
// at a probed point (ReLU at 0) or a Forward that differs from call to call
// (dropout: see before_forward) also shows as error.
#ifndef TANDEM_LAYERS_GRADIENT_CHECK_H_
#define TANDEM_LAYERS_GRADIENT_CHECK_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"

namespace tandem {

struct GradCheckOptions {
  // The perturbation of one element, up and down.
  float step = 1e-3f;
  // Probe at most this many elements per tensor (evenly spaced).
  int64_t max_probes = 64;
  // Called before every Forward, e.g. to rewind a dropout mask.
  std::function<void()> before_forward;
};

// What the check found for one tensor.
struct TensorGradCheck {
  std::string what;       // "input of layer 'act'", "parameter 'act.gain'"
  Shape shape;            // the tensor's
  int64_t probes = 0;     // elements compared
  double error = 0;       // relative error over them (NaN if either side had one)
  int64_t worst = 0;      // flat index of the probed element farthest off
  double numeric = 0;     // there: the central difference of Forward
  double analytic = 0;    // there: what Backward gave
};
// One line: what, shape, relative error, the worst element and both values.
std::ostream& operator<<(std::ostream& out, const TensorGradCheck& check);

struct GradCheckResult {
  // The input first (a layer's), then each parameter in Parameters() order.
  std::vector<TensorGradCheck> tensors;

  // The largest relative error; NaN if any tensor's is NaN.
  double max_error() const;
  // The tensor with max_error().
  const TensorGradCheck& worst() const;
  // Throws tandem::Error when max_error() exceeds `tolerance` (or is NaN),
  // naming the worst tensor and its element farthest off
  // (tests/layers/gradient_check_test.cc gets this one):
  //   gradient check: parameter 'add.w' [2, 3] has relative error 1.2726,
  //   over the tolerance 0.01; worst at element [1, 1]: Backward gave 5,
  //   central differences of Forward -1.67029 (6 elements probed): check
  //   that Backward adds this gradient and reads what Forward saved; ...
  // Returns *this otherwise.
  const GradCheckResult& Require(double tolerance) const;
};

// Compares the layer's gradients for input `x` and for every parameter with
// central differences; prints one line per tensor to stdout.
GradCheckResult CompareLayerGradients(Layer& layer, const Tensor& x,
                                      const GradCheckOptions& options = {});
// Same for a loss's gradient with respect to its prediction.
GradCheckResult CompareLossGradient(Loss& loss, const Tensor& pred, const Tensor& target,
                                    const GradCheckOptions& options = {});

// The shorthands: the comparison's max_error().
double CheckLayerGradients(Layer& layer, const Tensor& x,
                           const GradCheckOptions& options = {});
double CheckLossGradient(Loss& loss, const Tensor& pred, const Tensor& target,
                         const GradCheckOptions& options = {});

}  // namespace tandem

#endif  // TANDEM_LAYERS_GRADIENT_CHECK_H_
