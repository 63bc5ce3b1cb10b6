// Tests data/idx_reader.h on small IDX files written to the test's
// temporary directory, raw and gzip-compressed: good files load, and each
// kind of malformed file fails with an error naming the file and the fault.
#include "data/idx_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/check.h"

namespace tandem {
namespace data {
namespace {

using Bytes = std::vector<uint8_t>;

// An IDX file's bytes: magic 0x0000{type}{ndims}, big-endian dims, data.
Bytes Idx(const std::vector<uint32_t>& dims, const Bytes& data,
          uint8_t type = 0x08) {
  Bytes bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back((d >> shift) & 0xFF);
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes Iota(int n, int start = 0) {
  Bytes data(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(start + i);
  return data;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::string WriteRaw(const std::string& name, const Bytes& bytes) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_TRUE(out.good()) << "writing " << path;
  return path;
}

std::string WriteGz(const std::string& name, const Bytes& bytes) {
  const std::string path = TempPath(name);
  gzFile file = gzopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr) << "opening " << path;
  if (file == nullptr) return path;
  EXPECT_EQ(gzwrite(file, bytes.data(), bytes.size()),
            static_cast<int>(bytes.size()));
  EXPECT_EQ(gzclose(file), Z_OK);
  return path;
}

// Runs `body`, expecting a tandem::Error whose text contains every one of
// `needles` (the file's path and a word naming the fault).
void ExpectError(const std::function<void()>& body,
                 std::initializer_list<std::string> needles) {
  try {
    body();
  } catch (const Error& e) {
    const std::string text = e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(text.find(needle), std::string::npos)
          << "error text lacks \"" << needle << "\": " << text;
    }
    return;
  }
  ADD_FAILURE() << "expected a tandem::Error";
}

TEST(IdxReaderTest, ReadsRawFile) {
  const std::string path = WriteRaw("raw3d", Idx({2, 2, 3}, Iota(12)));
  const IdxArray array = ReadIdx(path);
  EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(array.data, Iota(12));
}

TEST(IdxReaderTest, ReadsGzipFile) {
  const std::string path = WriteGz("gz1d.gz", Idx({5}, Iota(5, 250)));
  const IdxArray array = ReadIdx(path);
  EXPECT_EQ(array.dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(array.data, Iota(5, 250));
}

TEST(IdxReaderTest, LoadsDatasetScaledToUnitRange) {
  const std::string images =
      WriteGz("ds-images.gz",
              Idx({3, 2, 2}, {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8}));
  const std::string labels = WriteRaw("ds-labels", Idx({3}, {9, 0, 4}));
  const TensorDataset dataset = LoadIdxDataset(images, labels);
  EXPECT_EQ(dataset.num_classes(), 10);
  EXPECT_EQ(dataset.size(), 3);
  EXPECT_EQ(dataset.feature_size(), 4);
  EXPECT_EQ(dataset.name(), images);
  ASSERT_EQ(dataset.features.shape(), (Shape{3, 4}));
  ASSERT_EQ(dataset.labels.shape(), (Shape{3}));
  const std::vector<float> pixels = dataset.features.ToVector();
  EXPECT_FLOAT_EQ(pixels[0], 0.f);
  EXPECT_FLOAT_EQ(pixels[1], 1.f);
  EXPECT_FLOAT_EQ(pixels[2], 0.2f);
  EXPECT_FLOAT_EQ(pixels[3], 0.4f);
  EXPECT_FLOAT_EQ(pixels[11], 8.f / 255.f);
  EXPECT_EQ(dataset.labels.ToVector(), (std::vector<float>{9, 0, 4}));
}

TEST(IdxReaderTest, MaxExamplesKeepsAPrefix) {
  const std::string images = WriteRaw("prefix-images", Idx({4, 1, 2}, Iota(8)));
  const std::string labels = WriteRaw("prefix-labels", Idx({4}, {1, 2, 3, 4}));
  const TensorDataset two = LoadIdxDataset(images, labels, 10, /*max_examples=*/2);
  ASSERT_EQ(two.features.shape(), (Shape{2, 2}));
  EXPECT_EQ(two.labels.ToVector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(LoadIdxDataset(images, labels, 10, 100).size(), 4);
}

TEST(IdxReaderTest, MissingFile) {
  const std::string path = TempPath("does-not-exist.gz");
  EXPECT_THROW(ReadIdx(path), Error);
  ExpectError([&] { ReadIdx(path); }, {path, "No such file"});
}

TEST(IdxReaderTest, DirectoryIsNotAFile) {
  const std::string path = ::testing::TempDir();
  ExpectError([&] { ReadIdx(path); }, {path, "is a directory"});
}

// A FIFO is refused before any open, which would wait for a writer.
TEST(IdxReaderTest, FifoIsNotAFile) {
  const std::string path = TempPath("fifo.gz");
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  ExpectError([&] { ReadIdx(path); }, {path, "not a regular file"});
}

TEST(IdxReaderTest, WrongMagic) {
  Bytes bytes = Idx({2}, {1, 2});
  bytes[0] = 0x1F;
  const std::string path = WriteRaw("bad-magic", bytes);
  ExpectError([&] { ReadIdx(path); }, {path, "magic number 0x1F000801"});
}

TEST(IdxReaderTest, UnsupportedTypeCode) {
  const std::string path =
      WriteGz("float.gz", Idx({1}, {0, 0, 0, 0}, /*type=*/0x0D));
  ExpectError([&] { ReadIdx(path); },
              {path, "unsupported IDX type code 0x0D (float32)"});
}

TEST(IdxReaderTest, BadDimensionCount) {
  const std::string none = WriteRaw("dims0", Idx({}, {}));
  ExpectError([&] { ReadIdx(none); }, {none, "0 dimensions, expected 1 to 4"});
  const std::string five = WriteRaw("dims5", Idx({1, 1, 1, 1, 1}, {7}));
  ExpectError([&] { ReadIdx(five); }, {five, "5 dimensions, expected 1 to 4"});
}

TEST(IdxReaderTest, BadDimensionSizes) {
  const std::string zero = WriteRaw("dim-zero", Idx({3, 0}, {}));
  ExpectError([&] { ReadIdx(zero); }, {zero, "dimension 1 of [3, 0] is 0"});
  const std::string huge = WriteRaw("dim-huge", Idx({65536, 65536}, {}));
  ExpectError([&] { ReadIdx(huge); }, {huge, "2^31 or more elements"});
}

TEST(IdxReaderTest, TruncatedHeader) {
  const std::string magic = WriteRaw("short-magic", {0, 0});
  ExpectError([&] { ReadIdx(magic); }, {magic, "truncated"});
  Bytes bytes = Idx({2, 2}, {});
  bytes.resize(9);  // magic, one dimension and half of the next
  const std::string dims = WriteRaw("short-dims", bytes);
  ExpectError([&] { ReadIdx(dims); }, {dims, "truncated", "found 5 bytes"});
}

TEST(IdxReaderTest, TruncatedData) {
  Bytes bytes = Idx({10, 2, 2}, Iota(40));
  bytes.resize(bytes.size() - 30);
  const std::string raw = WriteRaw("short-data", bytes);
  ExpectError([&] { ReadIdx(raw); },
              {raw,
               "truncated: header promises 40 bytes of data "
               "([10, 2, 2]), found 10"});
  const std::string gz = WriteGz("short-data.gz", bytes);
  ExpectError([&] { ReadIdx(gz); }, {gz, "truncated", "found 10"});
}

TEST(IdxReaderTest, TruncatedGzipStream) {
  // A gzip file cut short: zlib reports the stream ending early.
  // Pseudo-random bytes barely compress, so the cut lands mid-stream.
  Bytes noise(4096);
  uint32_t state = 1;
  for (uint8_t& b : noise) b = (state = state * 1664525u + 1013904223u) >> 24;
  const std::string whole = WriteGz("whole.gz", Idx({4096}, noise));
  std::ifstream in(whole, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)),
              std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  const std::string cut = WriteRaw("cut.gz", bytes);
  ExpectError([&] { ReadIdx(cut); }, {cut, "truncated"});
}

TEST(IdxReaderTest, TrailingBytes) {
  Bytes bytes = Idx({3}, {1, 2, 3});
  bytes.push_back(4);
  bytes.push_back(5);
  const std::string raw = WriteRaw("trailing", bytes);
  ExpectError([&] { ReadIdx(raw); },
              {raw, "2 trailing bytes after the 3 bytes of data"});
  const std::string gz = WriteGz("trailing.gz", bytes);
  ExpectError([&] { ReadIdx(gz); }, {gz, "2 trailing bytes"});
}

TEST(IdxReaderTest, CountMismatchNamesBothFiles) {
  const std::string images = WriteRaw("count-images", Idx({3, 1, 1}, Iota(3)));
  const std::string labels = WriteRaw("count-labels", Idx({2}, {0, 1}));
  ExpectError([&] { LoadIdxDataset(images, labels); },
              {images, labels, "has 3 images", "has 2 labels"});
}

TEST(IdxReaderTest, WrongRanks) {
  const std::string flat = WriteRaw("rank-images", Idx({3, 4}, Iota(12)));
  const std::string labels = WriteRaw("rank-labels", Idx({3}, {0, 1, 2}));
  ExpectError([&] { LoadIdxDataset(flat, labels); },
              {flat, "expected images [count, rows, cols] (3-D), got 2-D"});
  const std::string images = WriteRaw("rank-images3", Idx({3, 1, 1}, Iota(3)));
  const std::string grid = WriteRaw("rank-labels2", Idx({3, 1}, {0, 1, 2}));
  ExpectError([&] { LoadIdxDataset(images, grid); },
              {grid, "expected labels [count] (1-D), got 2-D"});
}

TEST(IdxReaderTest, LabelOutOfRange) {
  const std::string images = WriteRaw("range-images", Idx({4, 1, 1}, Iota(4)));
  const std::string labels =
      WriteGz("range-labels.gz", Idx({4}, {0, 9, 10, 12}));
  ExpectError([&] { LoadIdxDataset(images, labels, 10); },
              {labels, "label 10 at index 2 is out of range: expected 0 to 9"});
  // Labels past max_examples are validated too.
  ExpectError([&] { LoadIdxDataset(images, labels, 10, 1); },
              {labels, "index 2"});
}

TEST(IdxReaderTest, FashionMnistLayout) {
  // A miniature Fashion-MNIST directory: the file names are what's tested.
  const std::string dir = ::testing::TempDir();
  WriteGz("t10k-images-idx3-ubyte.gz", Idx({2, 2, 2}, Iota(8)));
  WriteGz("t10k-labels-idx1-ubyte.gz", Idx({2}, {3, 7}));
  const TensorDataset test = LoadFashionMnist(dir, /*train=*/false);
  EXPECT_EQ(test.labels.ToVector(), (std::vector<float>{3, 7}));
  EXPECT_EQ(test.features.shape(), (Shape{2, 4}));

  // No train-* files were written.
  ExpectError([&] { LoadFashionMnist(dir, /*train=*/true); },
              {dir + "/train-images-idx3-ubyte.gz", "not found",
               "sudo apt-get install dataset-fashion-mnist", "--data_dir"});
}

TEST(IdxReaderTest, FashionMnistMissingDirectory) {
  const std::string dir = TempPath("no-such-dir");
  ExpectError([&] { LoadFashionMnist(dir, /*train=*/true); },
              {dir, "directory not found",
               "sudo apt-get install dataset-fashion-mnist", "--data_dir"});
}

}  // namespace
}  // namespace data
}  // namespace tandem
