// Drawing words from a trained character-level model: every word starts
// from a context of end tokens; each step feeds the last `context` tokens,
// turns the logits into probabilities (softmax) and draws the next token,
// until the end token or `max_length` characters.
//
//   std::vector<std::u32string> words =
//       SampleWords(model, vocab, /*context=*/8, /*count=*/5, /*seed=*/42, device);
#ifndef TANDEM_EXAMPLES_CHAR_LM_SAMPLE_H_
#define TANDEM_EXAMPLES_CHAR_LM_SAMPLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "examples/char_lm/words.h"
#include "layers/layer.h"

namespace tandem {
namespace char_lm {

// The words are drawn together, one batch row each, with draws from
// Rng(seed): the same model and seed give the same words. The model runs in
// evaluation mode on `device` and is back in training mode on return.
std::vector<std::u32string> SampleWords(Layer& model, const Vocabulary& vocab, int64_t context,
                                        int count, uint64_t seed, Device device,
                                        int max_length = 32);

// The token drawn from `probabilities` (summing to about 1) by a uniform
// draw u in [0, 1): the first whose cumulative sum exceeds u, the last
// positive one if rounding leaves u beyond them all.
int DrawToken(const float* probabilities, int64_t size, float u);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_SAMPLE_H_
