// The character-level language model's data: a word list read as UTF-8 code
// points, split 90/10 by word with a fixed seed, a vocabulary of its
// characters plus one end token, (previous N characters, next character)
// windows, and a count-based bigram baseline to compare against.
//
//   std::vector<std::u32string> words = LoadWords("/usr/share/dict/american-english");
//   WordSplit split = SplitWords(words, /*seed=*/1);   // 90% train, 10% validation
//   Vocabulary vocab = Vocabulary::FromWords(words);   // 69 characters + end = 70 tokens
//   Windows train = MakeWindows(split.train, vocab, /*context=*/8);
//   // train.contexts [examples, 8], train.next [examples]: token ids as floats
//   double bigram = BigramLoss(split.train, split.validation, vocab);  // nats/char
//
// As in makemore, a word of n characters gives n + 1 examples: each of its
// characters and then the end token, each predicted from the N tokens before
// it, with the end token (printed '.') as the padding before the word. A
// loss "per character" is the mean over those examples, end tokens included.
#ifndef TANDEM_EXAMPLES_CHAR_LM_WORDS_H_
#define TANDEM_EXAMPLES_CHAR_LM_WORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tandem {
namespace char_lm {

// Debian's wamerican package installs it (tools/install_deps.sh does).
inline constexpr const char* kDefaultWordList = "/usr/share/dict/american-english";

// Token 0: the end of a word, and the padding before its first character.
inline constexpr int kEndToken = 0;

// The words of `path`, one a line, as Unicode code points; blank lines and a
// trailing '\r' are skipped. Throws tandem::Error naming the file when it
// cannot be read (saying how to install the word list), holds invalid UTF-8
// (naming the line), or holds no word.
std::vector<std::u32string> LoadWords(const std::string& path);

// UTF-8 <-> code points. FromUtf8 throws tandem::Error on invalid input.
std::u32string FromUtf8(const std::string& text);
std::string ToUtf8(const std::u32string& text);

struct WordSplit {
  std::vector<std::u32string> train, validation;
};

// A permutation of the words drawn from Rng(seed), cut into the first
// round(n * (1 - validation_fraction)) for training and the rest for
// validation. The same words and seed give the same split.
WordSplit SplitWords(const std::vector<std::u32string>& words, uint64_t seed,
                     double validation_fraction = 0.1);

// The distinct characters of a word list, sorted by code point; character
// i is token i + 1.
class Vocabulary {
 public:
  static Vocabulary FromWords(const std::vector<std::u32string>& words);
  // Characters plus the end token.
  int64_t size() const { return static_cast<int64_t>(chars_.size()) + 1; }
  // The token of `c`; throws tandem::Error for a character not in the list.
  int Token(char32_t c) const;
  // The character of token `token` > 0.
  char32_t Char(int token) const;
  const std::vector<char32_t>& chars() const { return chars_; }

 private:
  std::vector<char32_t> chars_;
};

// Every (context, next) example of `words`, word after word: contexts
// [examples, context] and next [examples], token ids as float32 (the form
// Embedding and SoftmaxCrossEntropyLoss take), on the CPU.
struct Windows {
  Tensor contexts;
  Tensor next;
  int64_t size() const { return next.defined() ? next.dim(0) : 0; }
};
Windows MakeWindows(const std::vector<std::u32string>& words, const Vocabulary& vocab,
                    int64_t context);

// The baseline: P(next | previous token) from counts over `train` with
// add-one (Laplace) smoothing; returns its mean negative log-likelihood over
// `evaluated`'s examples, in nats per character.
double BigramLoss(const std::vector<std::u32string>& train,
                  const std::vector<std::u32string>& evaluated, const Vocabulary& vocab);

}  // namespace char_lm
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_CHAR_LM_WORDS_H_
