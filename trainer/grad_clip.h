// Clipping the gradient by its global norm: every parameter's gradient
// scaled by one factor, so that their joint L2 norm is at most max_norm.
//
//   GradClipper clipper(model.Parameters(), /*max_norm=*/1.f, device);
//   reducer.Backward(loss.Backward());   // gradients summed over workers
//   clipper.Clip();                      // then the optimizer's Step()
//   optimizer.Step();
//
// All on the device's main lane, with no host wait: the norm and the factor
// max_norm / max(norm + 1e-6, max_norm) are one-element device tensors.
// Every worker clips the same reduced gradient by the same factor, so the
// replicas stay equal.
#ifndef TANDEM_TRAINER_GRAD_CLIP_H_
#define TANDEM_TRAINER_GRAD_CLIP_H_

#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/layer.h"

namespace tandem {

class GradClipper {
 public:
  // max_norm > 0. Gradients that are not defined at Clip are left out.
  GradClipper(std::vector<NamedParameter> params, float max_norm, Device device);
  void Clip();
  // [1]: the norm before the last Clip (reading it waits for the device).
  const Tensor& last_norm() const { return norm_; }

 private:
  std::vector<NamedParameter> params_;
  float max_norm_;
  Tensor squares_;  // [1, parameters]: each gradient's sum of squares
  Tensor norm_;     // [1]
  Tensor pair_;     // [1, 2]: norm + eps, max_norm
  Tensor factor_;   // [1]
};

}  // namespace tandem

#endif  // TANDEM_TRAINER_GRAD_CLIP_H_
