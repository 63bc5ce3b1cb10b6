#include "examples/gpt/corpus.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace tandem {
namespace gpt {

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good()) << "cannot read " << path << " (" << std::strerror(errno) << ")";
  std::ostringstream bytes;
  bytes << in.rdbuf();
  TANDEM_CHECK(!in.bad()) << "cannot read " << path << " (" << std::strerror(errno) << ")";
  return bytes.str();
}

}  // namespace

CorpusListing ListCorpus(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  TANDEM_CHECK(d != nullptr) << "cannot list the corpus folder " << dir << " ("
                             << std::strerror(errno) << ")";
  std::vector<std::string> names;
  while (const dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());  // std::string compares as bytes
  CorpusListing listing;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st;
    const char* skip = nullptr;
    if (EndsWith(name, ".dat")) {
      skip = "index";
    } else if (EndsWith(name, ".u8")) {
      skip = "UTF-8 alias";
    } else if (lstat(path.c_str(), &st) != 0) {
      skip = "cannot be looked at";
    } else if (S_ISLNK(st.st_mode)) {
      skip = "symbolic link";
    } else if (S_ISDIR(st.st_mode)) {
      skip = "folder";
    } else if (!S_ISREG(st.st_mode)) {
      skip = "not a regular file";
    }
    if (skip == nullptr) {
      listing.files.push_back(name);
    } else {
      listing.skipped.push_back(name + " (" + skip + ")");
    }
  }
  return listing;
}

Corpus LoadCorpus(const std::string& path) {
  Corpus corpus;
  corpus.path = path;
  struct stat st;
  TANDEM_CHECK(stat(path.c_str(), &st) == 0)
      << "cannot read the corpus " << path << " (" << std::strerror(errno) << ")";
  if (!S_ISDIR(st.st_mode)) {
    corpus.listing.files.push_back("");
    corpus.text = ReadFile(path);
    return corpus;
  }
  corpus.listing = ListCorpus(path);
  TANDEM_CHECK(!corpus.listing.files.empty())
      << "the corpus folder " << path << " holds no text file to read ("
      << corpus.listing.skipped.size() << " entries skipped)";
  for (const std::string& name : corpus.listing.files) corpus.text += ReadFile(path + "/" + name);
  return corpus;
}

ByteVocabulary ByteVocabulary::FromText(const std::string& text) {
  std::array<bool, 256> seen{};
  for (const char c : text) seen[static_cast<uint8_t>(c)] = true;
  ByteVocabulary vocab;
  vocab.token_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (!seen[b]) continue;
    vocab.token_[b] = static_cast<int>(vocab.bytes_.size());
    vocab.bytes_.push_back(static_cast<uint8_t>(b));
  }
  return vocab;
}

int ByteVocabulary::Token(uint8_t byte) const {
  TANDEM_CHECK(token_[byte] >= 0) << "byte 0x" << std::hex << static_cast<int>(byte)
                                  << " is not in the corpus's vocabulary";
  return token_[byte];
}

uint8_t ByteVocabulary::Byte(int token) const {
  TANDEM_CHECK(token >= 0 && token < size())
      << "token " << token << " is not in the vocabulary of " << size() << " bytes";
  return bytes_[token];
}

std::vector<uint8_t> ByteVocabulary::Encode(const std::string& text) const {
  std::vector<uint8_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    tokens[i] = static_cast<uint8_t>(Token(static_cast<uint8_t>(text[i])));
  }
  return tokens;
}

TokenSplit SplitTokens(const std::vector<uint8_t>& tokens, double validation_fraction) {
  TANDEM_CHECK(validation_fraction >= 0.0 && validation_fraction < 1.0)
      << "validation fraction must be in [0, 1), got " << validation_fraction;
  const size_t train = static_cast<size_t>(
      std::llround(static_cast<double>(tokens.size()) * (1.0 - validation_fraction)));
  TokenSplit split;
  split.train.assign(tokens.begin(), tokens.begin() + train);
  split.validation.assign(tokens.begin() + train, tokens.end());
  return split;
}

double BigramLoss(const std::vector<uint8_t>& train, const std::vector<uint8_t>& evaluated,
                  int64_t vocab) {
  TANDEM_CHECK(evaluated.size() >= 2) << "no pair of tokens to evaluate the bigram baseline on";
  // counts[previous * vocab + next], every pair starting at 1 (add-one).
  std::vector<double> counts(vocab * vocab, 1.0), totals(vocab, static_cast<double>(vocab));
  for (size_t i = 1; i < train.size(); ++i) {
    counts[train[i - 1] * vocab + train[i]] += 1.0;
    totals[train[i - 1]] += 1.0;
  }
  double nll = 0.0;
  for (size_t i = 1; i < evaluated.size(); ++i) {
    const int a = evaluated[i - 1], b = evaluated[i];
    nll -= std::log(counts[a * vocab + b] / totals[a]);
  }
  return nll / static_cast<double>(evaluated.size() - 1);
}

WindowDataset::WindowDataset(std::shared_ptr<const std::vector<uint8_t>> tokens, int64_t context,
                             int64_t vocab, std::string name, int64_t stride)
    : tokens_(std::move(tokens)),
      context_(context),
      vocab_(vocab),
      name_(std::move(name)),
      stride_(stride) {
  TANDEM_CHECK(tokens_ != nullptr && context_ >= 1 && stride_ >= 1)
      << name_ << ": needs tokens, a context of at least 1 and a stride of at least 1";
  windows_ = static_cast<int64_t>(tokens_->size()) - context_;
  TANDEM_CHECK(windows_ >= 1) << name_ << ": " << tokens_->size()
                              << " bytes hold no window of context + 1 = " << context_ + 1
                              << " bytes: use more text or a smaller --context";
  size_ = (windows_ - 1) / stride_ + 1;
}

WindowDataset WindowDataset::Spread(std::shared_ptr<const std::vector<uint8_t>> tokens,
                                    int64_t context, int64_t vocab, std::string name,
                                    int64_t count) {
  TANDEM_CHECK(count >= 1) << name << ": needs at least 1 window, got " << count;
  WindowDataset dataset(std::move(tokens), context, vocab, std::move(name));
  dataset.size_ = std::min(count, dataset.windows_);
  dataset.stride_ = 0;
  return dataset;
}

int64_t WindowDataset::start(int64_t i) const {
  if (stride_ > 0) return i * stride_;
  return static_cast<int64_t>(static_cast<__int128>(i) * windows_ / size_);
}

void WindowDataset::Gather(const std::vector<int64_t>& indices, Tensor& features,
                           Tensor& labels) const {
  data::CheckGatherOutputs(*this, indices.size(), features, labels);
  for (size_t i = 0; i < indices.size(); ++i) {
    TANDEM_CHECK(indices[i] >= 0 && indices[i] < size_)
        << name_ << ": Gather: indices[" << i << "] is " << indices[i] << ", expected 0 to "
        << size_ - 1 << " (the dataset has " << size_ << " windows)";
  }
  const uint8_t* t = tokens_->data();
  float* x = features.mutable_data();
  float* y = labels.mutable_data();
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint8_t* w = t + start(indices[i]);
    float* xi = x + i * context_;
    float* yi = y + i * context_;
    for (int64_t k = 0; k < context_; ++k) {
      xi[k] = static_cast<float>(w[k]);
      yi[k] = static_cast<float>(w[k + 1]);
    }
  }
}

}  // namespace gpt
}  // namespace tandem
