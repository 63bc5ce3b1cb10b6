// Mlp: the multi-layer perceptron builder.
//
//   Rng rng(42);
//   auto model = Mlp({784, 512, 256, 10}, Activation::kRelu, rng);
//   // fc1 (Linear 784→512, relu), fc2 (Linear 512→256, relu), fc3 (Linear 256→10)
//
// Hidden layers fuse their activation into the bias add; the last layer is
// linear (logits). Optional dropout follows each hidden activation. An MLP's
// input is usually data: pass BackwardArgs::input_grad = false to skip the
// first layer's input-gradient GEMM.
#ifndef TANDEM_LAYERS_MLP_H_
#define TANDEM_LAYERS_MLP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "layers/linear.h"
#include "layers/sequential.h"

namespace tandem {

struct MlpOptions {
  float dropout = 0.f;
  uint64_t dropout_seed = 0;
  Init init = Init::kKaimingUniform;
  Device device = Device::Cpu();
  Precision precision = Precision::kFp32;  // every Linear's (layers/precision.h)
};

// sizes = {in, hidden..., out}; at least {in, out}.
std::unique_ptr<Sequential> Mlp(const std::vector<int64_t>& sizes,
                                Activation activation, Rng& rng,
                                MlpOptions options = {});

}  // namespace tandem

#endif  // TANDEM_LAYERS_MLP_H_
