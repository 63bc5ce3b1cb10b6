#include "examples/char_lm/model.h"

#include <string>
#include <utility>

#include "core/check.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/residual.h"

namespace tandem {
namespace char_lm {

namespace {

LinearOptions LinearFor(const ModelConfig& config, Activation activation) {
  LinearOptions options;
  options.activation = activation;
  options.device = config.device;
  options.precision = config.precision;
  return options;
}

LayerNormOptions NormFor(const ModelConfig& config) {
  LayerNormOptions options;
  options.precision = config.precision;
  return options;
}

// x + drop(fc2(act(fc1(ln(x))))), fc2's weights scaled down at
// initialisation (kXavierUniform) so the stream starts near the identity;
// no Dropout where config.dropout is 0.
std::unique_ptr<Layer> Block(const ModelConfig& config, int index, Rng& rng) {
  const std::string name = "block" + std::to_string(index);
  auto inner = std::make_unique<Sequential>("mlp");
  inner->Emplace<LayerNorm>("ln", config.hidden, config.device, NormFor(config));
  inner->Emplace<Linear>("fc1", config.hidden, config.hidden, rng,
                         LinearFor(config, config.activation));
  LinearOptions out = LinearFor(config, Activation::kIdentity);
  out.init = Init::kXavierUniform;
  inner->Emplace<Linear>("fc2", config.hidden, config.hidden, rng, out);
  if (config.dropout > 0) {
    inner->Emplace<Dropout>("drop", config.dropout, config.dropout_seed + index);
  }
  return std::make_unique<Residual>(name, std::move(inner));
}

}  // namespace

std::unique_ptr<Sequential> BuildCharLm(const ModelConfig& config, Rng& rng) {
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"vocab", config.vocab},
                                    {"context", config.context},
                                    {"embed", config.embed},
                                    {"hidden", config.hidden}}) {
    TANDEM_CHECK(value >= 1) << "--" << flag << " must be at least 1, got " << value;
  }
  TANDEM_CHECK(config.blocks >= 0) << "--blocks must be at least 0, got " << config.blocks;
  TANDEM_CHECK(config.dropout >= 0 && config.dropout < 1)
      << "--dropout must be in [0, 1), got " << config.dropout;
  auto model = std::make_unique<Sequential>("char_lm");
  EmbeddingOptions embedding;
  embedding.precision = config.precision;
  model->Emplace<Embedding>("embed", config.vocab, config.embed, rng, config.device, embedding);
  model->Emplace<Linear>("fc_in", config.context * config.embed, config.hidden, rng,
                         LinearFor(config, Activation::kIdentity));
  for (int b = 0; b < config.blocks; ++b) model->Add(Block(config, b, rng));
  model->Emplace<LayerNorm>("ln_f", config.hidden, config.device, NormFor(config));
  model->Emplace<Linear>("head", config.hidden, config.vocab, rng,
                         LinearFor(config, Activation::kIdentity));
  return model;
}

}  // namespace char_lm
}  // namespace tandem
