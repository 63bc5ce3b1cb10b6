// A character-level GPT (GPT-2's architecture at nanoGPT's "baby GPT"
// size): token and learned position embeddings, pre-LayerNorm transformer
// blocks, a final LayerNorm and a linear head to the vocabulary:
//
//   tok (Embedding vocab→width, per position)  ids [batch, T] -> [batch, T, width]
//   pos (PositionEmbedding context×width)      + the first T rows of its table
//   block0..blockL-1 (TransformerBlock)        causal attention, `heads` heads; MLP 4 width
//   ln_f (LayerNorm), head (Linear width→vocab) -> logits [batch, T, vocab]
//
//   ModelConfig config;
//   config.vocab = vocab.size();
//   Rng rng(seed);
//   std::unique_ptr<Sequential> model = BuildGpt(config, rng);
//
// Initialisation: the token table N(0, 1) (Embedding's), the position table
// N(0, 0.02) (GPT-2's), every Linear's weights Xavier-uniform and its bias
// zero, LayerNorms ones and zeros. No dropout, no weight tying: the head has
// its own weights. T may be anything from 1 to `context`, so the same model
// samples from a growing prompt.
#ifndef TANDEM_EXAMPLES_GPT_MODEL_H_
#define TANDEM_EXAMPLES_GPT_MODEL_H_

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/rng.h"
#include "layers/precision.h"
#include "layers/sequential.h"

namespace tandem {
namespace gpt {

struct ModelConfig {
  int64_t vocab = 0;     // distinct bytes of the corpus
  int64_t context = 64;  // positions: the longest sequence it sees
  int64_t layers = 4;    // transformer blocks
  int64_t heads = 4;     // attention heads per block
  int64_t width = 128;   // the residual stream; a multiple of heads
  Device device = Device::Cpu();
  Precision precision = Precision::kFp32;
};

// Weights drawn from `rng` on the host: the same seed gives the same model
// on every device and rank. Throws UsageError (trainer/train_config.h)
// naming the flag for a size below 1 (layers 0 is allowed) or a width that
// heads does not divide.
std::unique_ptr<Sequential> BuildGpt(const ModelConfig& config, Rng& rng);

// Throws what BuildGpt throws, without building anything.
void CheckModelConfig(const ModelConfig& config);

}  // namespace gpt
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_GPT_MODEL_H_
