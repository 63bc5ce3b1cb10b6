#include "examples/char_lm/words.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/check.h"
#include "core/rng.h"

namespace tandem {
namespace char_lm {

namespace {

// The code point starting at text[i], advancing i past it; false for a
// malformed sequence (a stray continuation byte, a truncated or overlong
// sequence, a surrogate, or beyond U+10FFFF).
bool DecodeOne(const std::string& text, size_t& i, char32_t& out) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  int extra = 0;
  char32_t c = 0;
  if (lead < 0x80) {
    c = lead;
  } else if ((lead & 0xE0) == 0xC0) {
    extra = 1, c = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, c = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, c = lead & 0x07;
  } else {
    return false;
  }
  if (i + extra >= text.size()) return false;  // truncated
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return false;
    c = (c << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (c < kMin[extra] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
  i += extra + 1;
  out = c;
  return true;
}

}  // namespace

std::u32string FromUtf8(const std::string& text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    char32_t c;
    TANDEM_CHECK(DecodeOne(text, i, c)) << "invalid UTF-8 at byte " << i;
    out.push_back(c);
  }
  return out;
}

std::string ToUtf8(const std::u32string& text) {
  std::string out;
  for (const char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::vector<std::u32string> LoadWords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  // The user's setup, not a bug: no source location in the message.
  if (!in.good()) {
    throw Error("cannot read the word list " + path + " (" + std::strerror(errno) +
                "): install Debian's wamerican (tools/install_deps.sh does), or pass "
                "--words=FILE with one word per line");
  }
  std::vector<std::u32string> words;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    try {
      words.push_back(FromUtf8(line));
    } catch (const Error& e) {
      throw Error(path + ":" + std::to_string(number) +
                  ": not UTF-8 text; the word list must be UTF-8, one word per line");
    }
  }
  TANDEM_CHECK(!words.empty()) << "the word list " << path << " holds no word";
  return words;
}

WordSplit SplitWords(const std::vector<std::u32string>& words, uint64_t seed,
                     double validation_fraction) {
  TANDEM_CHECK(validation_fraction >= 0.0 && validation_fraction < 1.0)
      << "validation fraction must be in [0, 1), got " << validation_fraction;
  std::vector<int64_t> order(words.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  Rng(seed).Shuffle(order);
  const size_t train = static_cast<size_t>(
      std::llround(static_cast<double>(words.size()) * (1.0 - validation_fraction)));
  WordSplit split;
  for (size_t i = 0; i < order.size(); ++i) {
    (i < train ? split.train : split.validation).push_back(words[order[i]]);
  }
  return split;
}

Vocabulary Vocabulary::FromWords(const std::vector<std::u32string>& words) {
  Vocabulary vocab;
  for (const std::u32string& word : words) {
    vocab.chars_.insert(vocab.chars_.end(), word.begin(), word.end());
  }
  std::sort(vocab.chars_.begin(), vocab.chars_.end());
  vocab.chars_.erase(std::unique(vocab.chars_.begin(), vocab.chars_.end()), vocab.chars_.end());
  return vocab;
}

int Vocabulary::Token(char32_t c) const {
  const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
  TANDEM_CHECK(it != chars_.end() && *it == c)
      << "character U+" << std::hex << static_cast<uint32_t>(c) << " is not in the vocabulary";
  return static_cast<int>(it - chars_.begin()) + 1;
}

char32_t Vocabulary::Char(int token) const {
  TANDEM_CHECK(token > 0 && token <= static_cast<int>(chars_.size()))
      << "token " << token << " is not a character (vocabulary of " << size() << ")";
  return chars_[token - 1];
}

Windows MakeWindows(const std::vector<std::u32string>& words, const Vocabulary& vocab,
                    int64_t context) {
  TANDEM_CHECK(context > 0) << "the context must be at least 1 character, got " << context;
  int64_t examples = 0;
  for (const std::u32string& word : words) examples += static_cast<int64_t>(word.size()) + 1;
  std::vector<float> contexts, next;
  contexts.reserve(examples * context);
  next.reserve(examples);
  std::vector<float> window(context);
  for (const std::u32string& word : words) {
    std::fill(window.begin(), window.end(), static_cast<float>(kEndToken));
    for (size_t i = 0; i <= word.size(); ++i) {
      const int token = i < word.size() ? vocab.Token(word[i]) : kEndToken;
      contexts.insert(contexts.end(), window.begin(), window.end());
      next.push_back(static_cast<float>(token));
      std::rotate(window.begin(), window.begin() + 1, window.end());
      window.back() = static_cast<float>(token);
    }
  }
  Windows w;
  if (examples == 0) return w;
  w.contexts = Tensor::FromVector(contexts, {examples, context});
  w.next = Tensor::FromVector(next, {examples});
  return w;
}

double BigramLoss(const std::vector<std::u32string>& train,
                  const std::vector<std::u32string>& evaluated, const Vocabulary& vocab) {
  const int64_t v = vocab.size();
  // counts[previous * v + next], every pair starting at 1 (add-one).
  std::vector<double> counts(v * v, 1.0), totals(v, static_cast<double>(v));
  const auto each_pair = [&](const std::vector<std::u32string>& words, auto&& fn) {
    for (const std::u32string& word : words) {
      int previous = kEndToken;
      for (size_t i = 0; i <= word.size(); ++i) {
        const int token = i < word.size() ? vocab.Token(word[i]) : kEndToken;
        fn(previous, token);
        previous = token;
      }
    }
  };
  each_pair(train, [&](int a, int b) {
    counts[a * v + b] += 1.0;
    totals[a] += 1.0;
  });
  double nll = 0.0;
  int64_t examples = 0;
  each_pair(evaluated, [&](int a, int b) {
    nll -= std::log(counts[a * v + b] / totals[a]);
    ++examples;
  });
  TANDEM_CHECK(examples > 0) << "no words to evaluate the bigram baseline on";
  return nll / static_cast<double>(examples);
}

}  // namespace char_lm
}  // namespace tandem
