#include "examples/gpt/model.h"

#include <string>
#include <utility>

#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/position_embedding.h"
#include "layers/transformer_block.h"
#include "trainer/train_config.h"

namespace tandem {
namespace gpt {

void CheckModelConfig(const ModelConfig& config) {
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"vocab", config.vocab},
                                    {"context", config.context},
                                    {"heads", config.heads},
                                    {"width", config.width}}) {
    if (value < 1) {
      throw UsageError(std::string("--") + flag + " must be at least 1, got " +
                       std::to_string(value));
    }
  }
  if (config.layers < 0) {
    throw UsageError("--layers must be at least 0, got " + std::to_string(config.layers));
  }
  if (config.width % config.heads != 0) {
    throw UsageError("--width=" + std::to_string(config.width) +
                     " is not a multiple of --heads=" + std::to_string(config.heads) +
                     ": each head attends over width / heads features; pick a width that "
                     "the heads divide (e.g. --width=" +
                     std::to_string((config.width / config.heads + 1) * config.heads) + ")");
  }
}

std::unique_ptr<Sequential> BuildGpt(const ModelConfig& config, Rng& rng) {
  CheckModelConfig(config);
  auto model = std::make_unique<Sequential>("gpt");
  EmbeddingOptions tokens;
  tokens.per_position = true;
  tokens.precision = config.precision;
  model->Emplace<Embedding>("tok", config.vocab, config.width, rng, config.device, tokens);
  PositionEmbeddingOptions positions;
  positions.precision = config.precision;
  model->Emplace<PositionEmbedding>("pos", config.context, config.width, rng, config.device,
                                    positions);
  TransformerBlockOptions block;
  block.device = config.device;
  block.precision = config.precision;
  for (int64_t b = 0; b < config.layers; ++b) {
    model->Emplace<TransformerBlock>("block" + std::to_string(b), config.width, config.heads, rng,
                                     block);
  }
  LayerNormOptions norm;
  norm.precision = config.precision;
  model->Emplace<LayerNorm>("ln_f", config.width, config.device, norm);
  LinearOptions head;
  head.init = Init::kXavierUniform;
  head.device = config.device;
  head.precision = config.precision;
  model->Emplace<Linear>("head", config.width, config.vocab, rng, head);
  return model;
}

}  // namespace gpt
}  // namespace tandem
