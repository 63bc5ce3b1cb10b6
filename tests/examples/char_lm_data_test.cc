// examples/char_lm/words.h: reading a word list, the fixed-seed split, the
// vocabulary, the context windows and the bigram baseline, on tiny word
// lists with hand-computed answers.
#include "examples/char_lm/words.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "core/check.h"

namespace tandem {
namespace char_lm {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::u32string> Words(std::initializer_list<const char*> utf8) {
  std::vector<std::u32string> words;
  for (const char* w : utf8) words.push_back(FromUtf8(w));
  return words;
}

TEST(CharLmWords, LoadsUtf8WordsSkippingBlankLines) {
  const std::string path = WriteFile("words.txt", "ab\n\ncafé\r\nx\n");
  const std::vector<std::u32string> words = LoadWords(path);
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[1], std::u32string(U"caf\u00e9"));  // one code point, not two bytes
  EXPECT_EQ(ToUtf8(words[1]), "café");
}

TEST(CharLmWords, MissingFileSaysHowToInstallIt) {
  try {
    LoadWords("/no/such/dir/american-english");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/no/such/dir/american-english"), std::string::npos) << what;
    EXPECT_NE(what.find("install Debian's wamerican (tools/install_deps.sh does)"),
              std::string::npos) << what;
  }
}

TEST(CharLmWords, InvalidUtf8NamesTheLine) {
  const std::string path = WriteFile("bad.txt", "ok\nbad\xff\n");
  try {
    LoadWords(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FromUtf8("\xc3"), Error);          // truncated
  EXPECT_THROW(FromUtf8("\xc0\xaf"), Error);      // overlong '/'
  EXPECT_EQ(FromUtf8("\xf0\x9f\x98\x80"), std::u32string(U"\U0001F600"));
}

TEST(CharLmWords, SplitIsDeterministicDisjointAndNinetyTen) {
  std::vector<std::u32string> words;
  for (int i = 0; i < 100; ++i) words.push_back(FromUtf8("w" + std::to_string(i)));
  const WordSplit a = SplitWords(words, 7), b = SplitWords(words, 7), c = SplitWords(words, 8);
  EXPECT_EQ(a.train.size(), 90u);
  EXPECT_EQ(a.validation.size(), 10u);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validation, b.validation);
  EXPECT_NE(a.validation, c.validation);  // another seed, another split
  std::set<std::u32string> all(a.train.begin(), a.train.end());
  all.insert(a.validation.begin(), a.validation.end());
  EXPECT_EQ(all.size(), 100u);  // every word once
  EXPECT_NE(a.train.front(), words.front());  // shuffled, not cut in file order
}

TEST(CharLmWords, VocabularyIsSortedCharactersAfterTheEndToken) {
  const Vocabulary vocab = Vocabulary::FromWords(Words({"ba", "é", "ab"}));
  EXPECT_EQ(vocab.size(), 4);  // a, b, é + end
  EXPECT_EQ(vocab.Token(U'a'), 1);
  EXPECT_EQ(vocab.Token(U'b'), 2);
  EXPECT_EQ(vocab.Token(U'\u00e9'), 3);
  EXPECT_EQ(vocab.Char(3), U'\u00e9');
  EXPECT_THROW(vocab.Token(U'z'), Error);
  EXPECT_THROW(vocab.Char(kEndToken), Error);
}

TEST(CharLmWords, WindowsArePaddedWithTheEndToken) {
  const std::vector<std::u32string> words = Words({"ab", "b"});
  const Vocabulary vocab = Vocabulary::FromWords(words);  // a=1, b=2
  const Windows w = MakeWindows(words, vocab, 2);
  ASSERT_EQ(w.size(), 5);  // "ab." and "b."
  EXPECT_EQ(w.contexts.shape(), (Shape{5, 2}));
  EXPECT_EQ(w.contexts.ToVector(), (std::vector<float>{0, 0,  0, 1,  1, 2,  0, 0,  0, 2}));
  EXPECT_EQ(w.next.ToVector(), (std::vector<float>{1, 2, 0, 2, 0}));
}

TEST(CharLmWords, BigramLossByHand) {
  // Vocabulary {end, a}: train "a" counts end->a 1, a->end 1; plus one each:
  // P(a|end) = 2/3, P(end|a) = 2/3. Evaluated "aa": -log(2/3) - log(1/3) -
  // log(2/3) over 3 examples.
  const Vocabulary vocab = Vocabulary::FromWords(Words({"a"}));
  const double expected = -(2 * std::log(2.0 / 3.0) + std::log(1.0 / 3.0)) / 3.0;
  EXPECT_NEAR(BigramLoss(Words({"a"}), Words({"aa"}), vocab), expected, 1e-12);
}

}  // namespace
}  // namespace char_lm
}  // namespace tandem
