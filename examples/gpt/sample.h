// Text from a trained GPT: starting from a prompt, each step feeds the last
// `context` tokens, takes the logits at the last position and picks the
// next token (the most likely at temperature 0, else a draw from
// softmax(logits / temperature)), as nanoGPT's sample.py does without top-k.
//
//   std::string text = SampleText(model, vocab, /*context=*/64, "\n", /*length=*/500,
//                                 /*temperature=*/0.8f, /*seed=*/43, device);
#ifndef TANDEM_EXAMPLES_GPT_SAMPLE_H_
#define TANDEM_EXAMPLES_GPT_SAMPLE_H_

#include <cstdint>
#include <string>

#include "core/device.h"
#include "examples/gpt/corpus.h"
#include "layers/layer.h"

namespace tandem {
namespace gpt {

// The prompt followed by `length` bytes drawn from Rng(seed): the same
// model, prompt and seed give the same text. An empty prompt starts from a
// newline (the first byte of the vocabulary if the corpus has none), which
// is not part of the text returned. The model runs in evaluation mode on
// `device`, one sequence at a time, and is back in training mode on return.
// Throws tandem::Error for a prompt byte that is not in the vocabulary.
std::string SampleText(Layer& model, const ByteVocabulary& vocab, int64_t context,
                       const std::string& prompt, int64_t length, float temperature, uint64_t seed,
                       Device device);

// The next token from one position's `logits`: the argmax (the first of
// ties) when temperature is 0, else the token where the cumulative sum of
// softmax(logits / temperature) first exceeds the uniform draw u in [0, 1)
// (the last token with positive probability if rounding leaves u beyond).
int PickToken(const float* logits, int64_t size, float temperature, float u);

}  // namespace gpt
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_GPT_SAMPLE_H_
