#include "examples/gpt/sample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace tandem {
namespace gpt {

int PickToken(const float* logits, int64_t size, float temperature, float u) {
  const int64_t best = std::max_element(logits, logits + size) - logits;
  if (temperature <= 0.f) return static_cast<int>(best);
  std::vector<double> p(size);
  double total = 0.0;
  for (int64_t t = 0; t < size; ++t) {
    p[t] = std::exp((static_cast<double>(logits[t]) - logits[best]) / temperature);
    total += p[t];
  }
  double sum = 0.0;
  int last_positive = static_cast<int>(best);
  for (int64_t t = 0; t < size; ++t) {
    if (p[t] <= 0.0) continue;
    last_positive = static_cast<int>(t);
    sum += p[t] / total;
    if (u < sum) return static_cast<int>(t);
  }
  return last_positive;
}

std::string SampleText(Layer& model, const ByteVocabulary& vocab, int64_t context,
                       const std::string& prompt, int64_t length, float temperature, uint64_t seed,
                       Device device) {
  TANDEM_CHECK(context >= 1 && length >= 0 && temperature >= 0.f)
      << "sampling needs a context >= 1, a length >= 0 and a temperature >= 0";
  std::vector<float> tokens;
  for (const char c : prompt) {
    const uint8_t byte = static_cast<uint8_t>(c);
    TANDEM_CHECK(vocab.Contains(byte))
        << "the prompt's byte 0x" << std::hex << static_cast<int>(byte)
        << " does not occur in the corpus: the model has no token for it";
    tokens.push_back(static_cast<float>(vocab.Token(byte)));
  }
  if (tokens.empty()) {
    tokens.push_back(static_cast<float>(vocab.Contains('\n') ? vocab.Token('\n') : 0));
  }
  std::string text = prompt;
  if (length == 0) return text;
  const bool was_training = model.training();
  model.SetTraining(false);
  Rng rng(seed);
  for (int64_t step = 0; step < length; ++step) {
    // The last `context` tokens, as one sequence [1, T].
    const int64_t t = std::min<int64_t>(context, static_cast<int64_t>(tokens.size()));
    const std::vector<float> window(tokens.end() - t, tokens.end());
    Tensor logits = model.Forward(Tensor::FromVector(window, {1, t}, device));
    const int64_t v = logits.dim(logits.rank() - 1);
    // Only the last position's row comes back to the host (as float32).
    const std::vector<float> row = logits.Reshape({t, v}).Slice(t - 1, t).ToVector();
    const int token = PickToken(row.data(), v, temperature, rng.Uniform());
    tokens.push_back(static_cast<float>(token));
    text += static_cast<char>(vocab.Byte(token));
  }
  model.SetTraining(was_training);
  return text;
}

}  // namespace gpt
}  // namespace tandem
