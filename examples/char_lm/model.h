// The character-level language model: the previous `context` tokens, each
// embedded, concatenated and mapped to `hidden` features, then residual MLP
// blocks with a LayerNorm before each, a final LayerNorm and logits over the
// vocabulary (Bengio et al. 2003, with makemore's and GPT's pre-norm
// residual blocks):
//
//   embed (Embedding vocab→embed)        [batch, context] -> [batch, context*embed]
//   fc_in (Linear context*embed→hidden)  -> [batch, hidden]
//   block0..blockB-1: x + fc2(act(fc1(ln(x))))  fc1, fc2: Linear hidden→hidden
//   ln_f (LayerNorm), head (Linear hidden→vocab) -> logits [batch, vocab]
//
//   ModelConfig config;
//   config.vocab = vocab.size();
//   Rng rng(seed);
//   std::unique_ptr<Sequential> model = BuildCharLm(config, rng);
#ifndef TANDEM_EXAMPLES_CHAR_LM_MODEL_H_
#define TANDEM_EXAMPLES_CHAR_LM_MODEL_H_

#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/device.h"
#include "core/rng.h"
#include "layers/precision.h"
#include "layers/sequential.h"

namespace tandem {
namespace char_lm {

struct ModelConfig {
  int64_t vocab = 0;       // tokens: characters + the end token
  int64_t context = 8;     // previous tokens seen
  int64_t embed = 24;      // features per token
  int64_t hidden = 256;    // width of the residual stream
  int64_t blocks = 2;      // residual MLP blocks
  Activation activation = Activation::kGelu;
  float dropout = 0.f;        // inside each block, after fc2; 0: none
  uint64_t dropout_seed = 0;  // block b's Dropout draws from dropout_seed + b
  Device device = Device::Cpu();
  Precision precision = Precision::kFp32;
};

// Weights drawn from `rng` on the host: the same seed gives the same model
// on every device and rank. Throws tandem::Error for a size below 1.
std::unique_ptr<Sequential> BuildCharLm(const ModelConfig& config, Rng& rng);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_MODEL_H_
