// examples/gpt's data: which files of a corpus folder are read and which
// skipped, in what order; the 90/10 cut; the byte vocabulary; the bigram
// baseline by hand; windows cut on the fly (every start, strided, spread).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "examples/gpt/corpus.h"

namespace tandem {
namespace gpt {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(base != nullptr ? base : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// b, a, a.dat, a.u8 -> a, link -> b, sub/ (with a file), pipe (a FIFO),
// empty: read a, b, empty in name order; the rest skipped, saying why.
std::string MakeFolder() {
  const std::string dir = TempDir("corpus");
  Write(dir + "/b", "BB\n");
  Write(dir + "/a", "A\xc3\xa9\n");
  Write(dir + "/a.dat", std::string("\x00\x01\xff", 3));
  Write(dir + "/empty", "");
  EXPECT_EQ(symlink("a", (dir + "/a.u8").c_str()), 0);
  EXPECT_EQ(symlink("b", (dir + "/link").c_str()), 0);
  mkdir((dir + "/sub").c_str(), 0755);
  Write(dir + "/sub/c", "not read");
  EXPECT_EQ(mkfifo((dir + "/pipe").c_str(), 0644), 0);
  return dir;
}

TEST(GptCorpus, ReadsRegularFilesInNameOrderAndSaysWhatItSkips) {
  const std::string dir = MakeFolder();
  const CorpusListing listing = ListCorpus(dir);
  EXPECT_EQ(listing.files, (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_EQ(listing.skipped,
            (std::vector<std::string>{"a.dat (index)", "a.u8 (UTF-8 alias)", "link (symbolic link)",
                                      "pipe (not a regular file)", "sub (folder)"}));
  const Corpus corpus = LoadCorpus(dir);
  EXPECT_EQ(corpus.text, "A\xc3\xa9\nBB\n");  // a, b, empty: bytes as they are
}

TEST(GptCorpus, ReadsOneFileAndRefusesAnEmptyFolder) {
  const std::string dir = TempDir("single");
  Write(dir + "/text", "hello");
  EXPECT_EQ(LoadCorpus(dir + "/text").text, "hello");
  const std::string empty = TempDir("nothing");
  Write(empty + "/x.dat", "index");
  try {
    LoadCorpus(empty);
    FAIL() << "an empty corpus loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no text file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadCorpus(dir + "/none"), Error);
}

TEST(GptCorpus, VocabularyIsTheDistinctBytesInOrder) {
  const ByteVocabulary vocab = ByteVocabulary::FromText(
      "b\xc3\xa9"
      "ab");
  EXPECT_EQ(vocab.size(), 4);
  EXPECT_EQ(vocab.bytes(), (std::vector<uint8_t>{'a', 'b', 0xa9, 0xc3}));
  EXPECT_EQ(vocab.Encode("ab\xc3"), (std::vector<uint8_t>{0, 1, 3}));
  EXPECT_EQ(vocab.Byte(2), 0xa9);
  EXPECT_FALSE(vocab.Contains('z'));
  EXPECT_THROW(vocab.Token('z'), Error);
}

TEST(GptCorpus, SplitCutsTheFirstNinetyPercent) {
  std::vector<uint8_t> tokens(25);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint8_t>(i);
  const TokenSplit split = SplitTokens(tokens);  // round(22.5) = 23
  ASSERT_EQ(split.train.size(), 23u);
  ASSERT_EQ(split.validation.size(), 2u);
  EXPECT_EQ(split.train.back(), 22);
  EXPECT_EQ(split.validation.front(), 23);
}

TEST(GptCorpus, BigramLossByHand) {
  // Counted on "abab" (a->b twice, b->a once) plus one for every pair:
  // P(b|a) = 3/4, P(a|b) = 2/3; "aba" is a->b then b->a.
  const std::vector<uint8_t> train = {0, 1, 0, 1}, evaluated = {0, 1, 0};
  EXPECT_NEAR(BigramLoss(train, evaluated, 2), -(std::log(0.75) + std::log(2.0 / 3.0)) / 2, 1e-12);
  EXPECT_THROW(BigramLoss(train, {0}, 2), Error);
}

std::shared_ptr<const std::vector<uint8_t>> Counting(int n) {
  auto tokens = std::make_shared<std::vector<uint8_t>>(n);
  for (int i = 0; i < n; ++i) (*tokens)[i] = static_cast<uint8_t>(i);
  return tokens;
}

TEST(GptWindows, FeaturesAreAWindowAndLabelsTheNextTokens) {
  const WindowDataset windows(Counting(10), 3, 10, "ten");
  EXPECT_EQ(windows.size(), 7);  // starts 0..6: each needs 3 + 1 tokens
  EXPECT_EQ(windows.feature_size(), 3);
  EXPECT_EQ(windows.label_size(), 3);
  EXPECT_EQ(windows.num_classes(), 10);
  Tensor x = Tensor::Empty({3, 3}), y = Tensor::Empty({3, 3});
  windows.Gather({6, 0}, x, y);
  const std::vector<float> xs = x.ToVector(), ys = y.ToVector();
  EXPECT_EQ(std::vector<float>(xs.begin(), xs.begin() + 6), (std::vector<float>{6, 7, 8, 0, 1, 2}));
  EXPECT_EQ(std::vector<float>(ys.begin(), ys.begin() + 6), (std::vector<float>{7, 8, 9, 1, 2, 3}));
  EXPECT_THROW(windows.Gather({7}, x, y), Error);
  Tensor wrong = Tensor::Empty({3});
  EXPECT_THROW(windows.Gather({0}, x, wrong), Error);
}

TEST(GptWindows, StridedAndSpreadSubsets) {
  const WindowDataset strided(Counting(10), 3, 10, "ten", /*stride=*/3);
  ASSERT_EQ(strided.size(), 3);  // 0, 3, 6: every token but the first predicted once
  EXPECT_EQ(strided.start(2), 6);
  const WindowDataset spread = WindowDataset::Spread(Counting(10), 3, 10, "ten", 2);
  ASSERT_EQ(spread.size(), 2);
  EXPECT_EQ(spread.start(0), 0);
  EXPECT_EQ(spread.start(1), 3);  // floor(1 * 7 / 2)
  EXPECT_EQ(WindowDataset::Spread(Counting(10), 3, 10, "ten", 100).size(), 7);
  try {
    WindowDataset(Counting(3), 3, 10, "short");
    FAIL() << "3 tokens made a window of 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("short: 3 bytes hold no window"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpt
}  // namespace tandem
