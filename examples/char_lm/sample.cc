#include "examples/char_lm/sample.h"

#include <algorithm>

#include "core/ops.h"
#include "core/rng.h"

namespace tandem {
namespace char_lm {

int DrawToken(const float* probabilities, int64_t size, float u) {
  double sum = 0.0;
  int last_positive = 0;
  for (int64_t t = 0; t < size; ++t) {
    if (probabilities[t] <= 0.f) continue;
    last_positive = static_cast<int>(t);
    sum += probabilities[t];
    if (u < sum) return static_cast<int>(t);
  }
  return last_positive;
}

std::vector<std::u32string> SampleWords(Layer& model, const Vocabulary& vocab, int64_t context,
                                        int count, uint64_t seed, Device device,
                                        int max_length) {
  std::vector<std::u32string> words(count);
  if (count <= 0) return words;
  const bool was_training = model.training();
  model.SetTraining(false);
  // [count, context] token ids, the most recent last.
  std::vector<float> windows(count * context, static_cast<float>(kEndToken));
  std::vector<bool> done(count, false);
  Rng rng(seed);
  for (int step = 0; step < max_length; ++step) {
    Tensor logits = model.Forward(Tensor::FromVector(windows, {count, context}, device));
    if (logits.dtype() != DType::kFloat32) logits = ops::ToDType(logits, DType::kFloat32);
    Tensor probabilities = Tensor::Empty(logits.shape(), device);
    ops::Softmax(logits, probabilities);
    const std::vector<float> p = probabilities.ToVector();
    const int64_t v = logits.dim(1);
    for (int r = 0; r < count; ++r) {
      if (done[r]) continue;
      const int token = DrawToken(&p[r * v], v, rng.Uniform());
      if (token == kEndToken) {
        done[r] = true;
        continue;
      }
      words[r] += vocab.Char(token);
      float* window = &windows[r * context];
      std::rotate(window, window + 1, window + context);
      window[context - 1] = static_cast<float>(token);
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
  }
  model.SetTraining(was_training);
  return words;
}

}  // namespace char_lm
}  // namespace tandem
