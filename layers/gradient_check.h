// Finite-difference gradient checks for layers and losses: does a layer's
// Backward agree with its Forward? For your own layers' tests, as for
// Tandem's (docs/custom_layers.md).
//
//   double err = CheckLayerGradients(layer, x);   // prints and returns the
//   EXPECT_LT(err, 1e-2);                          // worst relative error
//
// The layer is probed through L = sum(Forward(x) * r) for a fixed random r,
// so dL/dy = r; central differences of L are compared with what Backward
// produces for the input and for every parameter.
#ifndef TANDEM_LAYERS_GRADIENT_CHECK_H_
#define TANDEM_LAYERS_GRADIENT_CHECK_H_

#include <functional>

#include "core/tensor.h"
#include "layers/layer.h"
#include "layers/loss.h"

namespace tandem {

struct GradCheckOptions {
  float step = 1e-3f;
  // Probe at most this many elements per tensor (evenly spaced).
  int64_t max_probes = 64;
  // Called before every Forward, e.g. to rewind a dropout mask.
  std::function<void()> before_forward;
};

// Returns the largest relative error ||num - ana|| / max(||num||, ||ana||)
// over the input and each parameter; prints each one.
double CheckLayerGradients(Layer& layer, const Tensor& x,
                           const GradCheckOptions& options = {});
// Same for a loss's gradient with respect to its prediction.
double CheckLossGradient(Loss& loss, const Tensor& pred, const Tensor& target,
                         const GradCheckOptions& options = {});

}  // namespace tandem

#endif  // TANDEM_LAYERS_GRADIENT_CHECK_H_
