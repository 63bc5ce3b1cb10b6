#include "layers/layer.h"

#include "core/ops.h"

namespace tandem {

void ZeroGrad(Layer& layer) {
  for (Parameter& p : layer.Parameters()) ops::Fill(*p.grad, 0.f);
}

void MoveTo(Layer& layer, Device device) {
  for (Parameter& p : layer.Parameters()) {
    *p.value = p.value->To(device);
    *p.grad = Tensor::Zeros(p.value->shape(), device);
  }
}

int64_t ParameterCount(Layer& layer) {
  int64_t n = 0;
  for (Parameter& p : layer.Parameters()) n += p.value->numel();
  return n;
}

}  // namespace tandem
