// The GPT example's data: a folder of text files read as one byte string,
// split into training and validation text, a vocabulary of the bytes that
// occur, (context + 1)-byte windows cut from it on the fly, and a
// count-based bigram baseline to compare against.
//
//   Corpus corpus = LoadCorpus("/usr/share/games/fortunes");  // 43 files, 2.6 MB
//   ByteVocabulary vocab = ByteVocabulary::FromText(corpus.text);  // 114 bytes
//   TokenSplit split = SplitTokens(vocab.Encode(corpus.text));     // first 90% train
//   auto train = std::make_shared<const std::vector<uint8_t>>(split.train);
//   WindowDataset windows(train, /*context=*/64, vocab.size(), "train");  // every start
//   // windows.Gather: features [rows, 64] tokens t..t+63, labels [rows, 64]
//   // the tokens after each, t+1..t+64
//   double bigram = BigramLoss(split.train, split.validation, vocab.size());  // nats/byte
//
// A "character" is a byte: UTF-8 text is modelled byte by byte, as
// nanoGPT's character-level Shakespeare is modelled character by character.
#ifndef TANDEM_EXAMPLES_GPT_CORPUS_H_
#define TANDEM_EXAMPLES_GPT_CORPUS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace tandem {
namespace gpt {

// Debian's fortunes package (with fortunes-min) installs it
// (tools/install_deps.sh does).
inline constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";

// What a corpus folder holds, by name.
struct CorpusListing {
  std::vector<std::string> files;    // read, in this order
  std::vector<std::string> skipped;  // "art.dat (index)", "art.u8 (symbolic link)", ...
};

// The entries of `dir` (not its subfolders' entries), sorted by name as
// bytes (strcmp, as `LC_ALL=C ls` does). Read: regular files. Skipped, each
// with why: names ending in ".dat" (fortune's binary index of the file
// beside it) or ".u8" (in Debian, a symbolic link to the same text), then
// any symbolic link (it would read a file twice, or one outside the folder),
// subfolder, or other entry that is not a regular file (FIFO, socket,
// device). Throws tandem::Error naming `dir` when it cannot be listed.
CorpusListing ListCorpus(const std::string& dir);

struct Corpus {
  std::string path;       // the folder (or the one file) read
  CorpusListing listing;  // files relative to path; one "" for a file
  std::string text;       // every file's bytes, one after the other
};

// `path` is a folder (read as ListCorpus says) or a single regular file.
// Throws tandem::Error naming the file that cannot be read, or the folder
// where no file is left to read.
Corpus LoadCorpus(const std::string& path);

// The distinct bytes of a text, in byte order; byte b is token Token(b).
class ByteVocabulary {
 public:
  static ByteVocabulary FromText(const std::string& text);
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  bool Contains(uint8_t byte) const { return token_[byte] >= 0; }
  // Throws tandem::Error for a byte that is not in the vocabulary.
  int Token(uint8_t byte) const;
  uint8_t Byte(int token) const;
  // Every byte of `text` as its token; throws as Token does.
  std::vector<uint8_t> Encode(const std::string& text) const;
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::array<int, 256> token_{};
};

struct TokenSplit {
  std::vector<uint8_t> train, validation;
};

// The first round(n * (1 - validation_fraction)) tokens for training, the
// rest for validation: a cut, not a shuffle, so no window spans both.
TokenSplit SplitTokens(const std::vector<uint8_t>& tokens, double validation_fraction = 0.1);

// The validation loss (nats per token) of a bigram model counted on
// `train`, every pair of `vocab` tokens starting at one (add-one
// smoothing), over every consecutive pair of `evaluated`. Throws
// tandem::Error when `evaluated` has no pair.
double BigramLoss(const std::vector<uint8_t>& train, const std::vector<uint8_t>& evaluated,
                  int64_t vocab);

// Windows of context + 1 tokens, cut from a token array when Gather asks:
// example i starts at start(i); its features are the `context` tokens from
// there and its labels the `context` tokens one further on (the next token
// at every position), both as float32 token ids, the form Embedding and
// the NextToken objective take. Nothing is copied per window: the array is
// shared (read-only, so Gather may run on several threads at once).
class WindowDataset final : public data::Dataset {
 public:
  // Windows starting every `stride` tokens: 0, stride, 2 stride, ... up to
  // the last whole window (start tokens - context - 1). Stride 1 gives every
  // window; stride `context` the non-overlapping ones, which predict every
  // token but the first exactly once. Throws tandem::Error naming `name`
  // when the array holds no window (fewer than context + 1 tokens).
  WindowDataset(std::shared_ptr<const std::vector<uint8_t>> tokens, int64_t context, int64_t vocab,
                std::string name, int64_t stride = 1);
  // min(count, every window) windows with starts spread evenly over the
  // array, start(i) = floor(i * windows / count): a fixed subset.
  static WindowDataset Spread(std::shared_ptr<const std::vector<uint8_t>> tokens, int64_t context,
                              int64_t vocab, std::string name, int64_t count);

  int64_t size() const override { return size_; }
  int64_t feature_size() const override { return context_; }
  int64_t num_classes() const override { return vocab_; }
  int64_t label_size() const override { return context_; }
  std::string name() const override { return name_; }
  void Gather(const std::vector<int64_t>& indices, Tensor& features, Tensor& labels) const override;

  // Where example i starts in the token array.
  int64_t start(int64_t i) const;

 private:
  std::shared_ptr<const std::vector<uint8_t>> tokens_;
  int64_t context_;
  int64_t vocab_;
  std::string name_;
  int64_t windows_;  // every window the array holds: tokens - context
  int64_t stride_;   // 0: spread evenly
  int64_t size_;     // the windows this dataset serves
};

}  // namespace gpt
}  // namespace tandem

#endif  // TANDEM_EXAMPLES_GPT_CORPUS_H_
