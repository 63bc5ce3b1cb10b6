#include "layers/mlp.h"

#include <string>

#include "core/check.h"
#include "layers/dropout.h"

namespace tandem {

std::unique_ptr<Sequential> Mlp(const std::vector<int64_t>& sizes,
                                Activation activation, Rng& rng,
                                MlpOptions options) {
  TANDEM_CHECK(sizes.size() >= 2)
      << "Mlp needs at least input and output sizes, got " << sizes.size()
      << " size(s)";
  auto model = std::make_unique<Sequential>("mlp");
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const bool last = i + 2 == sizes.size();
    LinearOptions linear;
    linear.activation = last ? Activation::kIdentity : activation;
    linear.init = options.init;
    linear.device = options.device;
    linear.precision = options.precision;
    model->Emplace<Linear>("fc" + std::to_string(i + 1), sizes[i], sizes[i + 1],
                           rng, linear);
    if (!last && options.dropout > 0.f) {
      model->Emplace<Dropout>("drop" + std::to_string(i + 1), options.dropout,
                              options.dropout_seed + i);
    }
  }
  return model;
}

}  // namespace tandem
