// Tests data/npy_reader.h on files written byte by byte: every supported
// dtype and version, and every malformed case naming the file. The files
// numpy itself writes are read by npy_numpy_test (npy_numpy_check.py).
#include "data/npy_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace data {
namespace {

using ::tandem::testing::ErrorText;
using Bytes = std::string;

// A header dict for `descr` and `shape` ("(2, 3)").
std::string Dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran +
         ", 'shape': " + shape + ", }";
}

// A .npy file: magic, version major.0, length (2 bytes for 1.0, 4 after),
// the header padded with spaces and '\n' as numpy pads it, then `data`.
Bytes Npy(const std::string& header, const Bytes& data, int major = 1) {
  const size_t prefix = 8 + (major == 1 ? 2 : 4);
  std::string text = header;
  text.append(63 - (prefix + text.size()) % 64, ' ');
  text += '\n';
  Bytes out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out += static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  }
  return out + text + data;
}

template <typename T>
Bytes Raw(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T), '\0');
  std::memcpy(&out[0], values.data(), out.size());
  return out;
}

std::string Write(const std::string& name, const Bytes& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good()) << "writing " << path;
  return path;
}

// Expects ReadNpy(path) to throw with the path and every one of `needles`.
void ExpectReadError(const std::string& path, const std::vector<std::string>& needles) {
  const std::string text = ErrorText([&] { ReadNpy(path); });
  ASSERT_FALSE(text.empty()) << "expected ReadNpy(" << path << ") to throw";
  EXPECT_NE(text.find(path), std::string::npos) << "error lacks the path: " << text;
  for (const std::string& needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos)
        << "error text lacks \"" << needle << "\": " << text;
  }
}

TEST(NpyReaderTest, ReadsFloat32Version1) {
  const std::string path =
      Write("f4.npy", Npy(Dict("<f4", "(2, 3)"), Raw<float>({1, 2, 3, 4, 5, 6.5f})));
  const NpyArray array = ReadNpy(path);
  EXPECT_EQ(array.dtype, NpyDType::kFloat32);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array.num_elements(), 6);
  ASSERT_EQ(array.data.size(), 24u);
  float last;
  std::memcpy(&last, &array.data[20], 4);
  EXPECT_EQ(last, 6.5f);
}

TEST(NpyReaderTest, ReadsVersions2And3AndEveryDType) {
  for (int major : {2, 3}) {
    const std::string path = Write("v" + std::to_string(major) + ".npy",
                                   Npy(Dict("<i8", "(3,)"), Raw<int64_t>({7, -1, 9}), major));
    const NpyArray array = ReadNpy(path);
    EXPECT_EQ(array.dtype, NpyDType::kInt64);
    EXPECT_EQ(array.shape, (std::vector<int64_t>{3}));
    const Bytes expected = Raw<int64_t>({7, -1, 9});
    EXPECT_EQ(array.data, std::vector<uint8_t>(expected.begin(), expected.end()));
  }
  EXPECT_EQ(ReadNpy(Write("u1.npy", Npy(Dict("|u1", "(2,)"), "\x01\xff"))).dtype,
            NpyDType::kUInt8);
  EXPECT_EQ(ReadNpy(Write("i4.npy", Npy(Dict("<i4", "(1,)"), Raw<int32_t>({5})))).dtype,
            NpyDType::kInt32);
  EXPECT_EQ(ReadNpy(Write("f8.npy", Npy(Dict("<f8", "(1,)"), Raw<double>({5})))).dtype,
            NpyDType::kFloat64);
  // A scalar has shape () and one element; an empty array none.
  const NpyArray scalar = ReadNpy(Write("scalar.npy", Npy(Dict("<f4", "()"), Raw<float>({3}))));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(ReadNpy(Write("empty.npy", Npy(Dict("<f4", "(0, 4)"), ""))).num_elements(), 0);
}

TEST(NpyReaderTest, HeaderSpellings) {
  // Keys in any order, double quotes, no trailing comma, Python 2's 3L.
  const std::string path = Write(
      "spell.npy", Npy("{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<i4\"}",
                       Raw<int32_t>({1, 2, 3})));
  const NpyArray array = ReadNpy(path);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(array.dtype, NpyDType::kInt32);
}

TEST(NpyReaderTest, BadMagicAndVersion) {
  ExpectReadError(Write("magic.npy", Bytes("\x93NUMPX\x01\x00\x10\x00", 10)),
                  {"not a .npy file", "\\x93NUMPY"});
  ExpectReadError(Write("short.npy", "\x93NU"), {"truncated", "magic"});
  ExpectReadError(Write("noversion.npy", "\x93NUMPY\x01"), {"truncated", "format version"});
  Bytes v4 = Npy(Dict("<f4", "(1,)"), Raw<float>({1}));
  v4[6] = 4;
  ExpectReadError(Write("v4.npy", v4), {"unsupported .npy format version 4.0", "1.0, 2.0, 3.0"});
  ExpectReadError(Write("missing.npy", ""), {"truncated"});
  ExpectReadError(::testing::TempDir() + "/no-such.npy", {"cannot open"});
}

TEST(NpyReaderTest, TruncatedHeader) {
  ExpectReadError(Write("nolength.npy", Bytes("\x93NUMPY\x01\x00\x10", 9)),
                  {"truncated", "header length"});
  const Bytes full = Npy(Dict("<f4", "(1,)"), Raw<float>({1}));
  ExpectReadError(Write("cut.npy", full.substr(0, 30)), {"truncated", "header is 118 bytes"});
}

TEST(NpyReaderTest, HeaderNotADict) {
  ExpectReadError(Write("list.npy", Npy("['<f4', False, (1,)]", Raw<float>({1}))),
                  {"bad .npy header", "expected a dict"});
  ExpectReadError(Write("nokey.npy", Npy("{'descr': '<f4', 'shape': (1,), }", Raw<float>({1}))),
                  {"bad .npy header", "'fortran_order'"});
  ExpectReadError(Write("extra.npy", Npy("{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (1,), 'x': 1}",
                                         Raw<float>({1}))),
                  {"bad .npy header", "found 'x'"});
  ExpectReadError(Write("shape.npy", Npy(Dict("<f4", "[1]"), Raw<float>({1}))),
                  {"bad .npy header", "tuple"});
  ExpectReadError(Write("negative.npy", Npy(Dict("<f4", "(-1,)"), "")),
                  {"bad .npy header", "non-negative integer"});
  ExpectReadError(Write("bool.npy", Npy(Dict("<f4", "(1,)", "0"), Raw<float>({1}))),
                  {"bad .npy header", "True or False"});
  ExpectReadError(Write("open.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
                                        Raw<float>({1}))),
                  {"bad .npy header", "',' or '}'"});
  ExpectReadError(Write("struct.npy", Npy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                                          "'shape': (1,), }",
                                          Raw<float>({1}))),
                  {"bad .npy header", "dtype string"});
}

TEST(NpyReaderTest, UnsupportedDTypeAndOrder) {
  ExpectReadError(Write("f2.npy", Npy(Dict("<f2", "(2,)"), Bytes(4, '\0'))),
                  {"unsupported dtype '<f2'", "'<f4'", "'|u1'", "'<i8'"});
  ExpectReadError(Write("big.npy", Npy(Dict(">f4", "(1,)"), Raw<float>({1}))),
                  {"unsupported dtype '>f4' (big-endian)", "little-endian"});
  ExpectReadError(Write("fortran.npy", Npy(Dict("<f4", "(1, 2)", "True"), Raw<float>({1, 2}))),
                  {"fortran_order is True", "C order"});
}

TEST(NpyReaderTest, DataSizeMustMatchShape) {
  ExpectReadError(Write("truncdata.npy", Npy(Dict("<f4", "(2, 3)"), Raw<float>({1, 2, 3}))),
                  {"truncated", "[2, 3] '<f4' needs 24 bytes of data, found 12"});
  ExpectReadError(Write("trailing.npy", Npy(Dict("<f4", "(2,)"), Raw<float>({1, 2, 3}))),
                  {"4 bytes after the 8 bytes of data", "[2] '<f4'"});
  // A shape whose byte count overflows 64 bits is reported, not wrapped.
  ExpectReadError(Write("huge.npy", Npy(Dict("<f8", "(4611686018427387904, 4)"), "")),
                  {"truncated", "needs more bytes"});
}

TEST(NpyReaderTest, LoadsUint8FeaturesAndIntegerLabels) {
  const std::string x = Write("ds-x.npy", Npy(Dict("|u1", "(2, 2, 2)"),
                                              Bytes("\x00\xff\x33\x66\x01\x02\x03\x04", 8)));
  const std::string y = Write("ds-y.npy", Npy(Dict("<i8", "(2,)"), Raw<int64_t>({4, 1})));
  const TensorDataset d = LoadNpyDataset(x, y);
  EXPECT_EQ(d.name(), x);
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.feature_size(), 4);
  EXPECT_EQ(d.num_classes(), 5);  // the largest label + 1
  const std::vector<float> pixels = d.features.ToVector();
  EXPECT_EQ(pixels[1], 255 * (1.f / 255));
  EXPECT_EQ(pixels[2], 0x33 * (1.f / 255));
  EXPECT_EQ(d.labels.ToVector(), (std::vector<float>{4, 1}));
  EXPECT_EQ(LoadNpyDataset(x, y, 10, 1.f).num_classes(), 10);
  EXPECT_EQ(LoadNpyDataset(x, y, 10, 1.f).features.ToVector()[1], 255.f);
}

TEST(NpyReaderTest, LoadsFloatFeaturesAndLabels) {
  const std::string x = Write("f-x.npy", Npy(Dict("<f4", "(3,)"), Raw<float>({0.5f, -1, 2})));
  const std::string y = Write("f-y.npy", Npy(Dict("<f4", "(3,)"), Raw<float>({0, 2, 1})));
  const TensorDataset d = LoadNpyDataset(x, y);
  EXPECT_EQ(d.features.shape(), (Shape{3, 1}));
  EXPECT_EQ(d.features.ToVector(), (std::vector<float>{0.5f, -1, 2}));
  EXPECT_EQ(d.num_classes(), 3);
  const std::string x8 = Write("f8-x.npy", Npy(Dict("<f8", "(1, 2)"), Raw<double>({0.1, 3})));
  const std::string y4 = Write("i4-y.npy", Npy(Dict("<i4", "(1,)"), Raw<int32_t>({0})));
  EXPECT_EQ(LoadNpyDataset(x8, y4).features.ToVector(), (std::vector<float>{0.1f, 3}));
}

TEST(NpyReaderTest, DatasetErrors) {
  const std::string x = Write("e-x.npy", Npy(Dict("<f4", "(2, 1)"), Raw<float>({1, 2})));
  const std::string y3 = Write("e-y3.npy", Npy(Dict("|u1", "(3,)"), Bytes("\x00\x01\x02", 3)));
  auto expect = [](const std::function<void()>& body, const std::vector<std::string>& needles) {
    const std::string text = ErrorText(body);
    ASSERT_FALSE(text.empty()) << "expected an error";
    for (const std::string& needle : needles) {
      EXPECT_NE(text.find(needle), std::string::npos) << "lacks \"" << needle << "\": " << text;
    }
  };
  expect([&] { LoadNpyDataset(x, y3); }, {x, "2 examples", y3, "3 labels"});
  const std::string y = Write("e-y.npy", Npy(Dict("<i4", "(2,)"), Raw<int32_t>({0, 7})));
  expect([&] { LoadNpyDataset(x, y, 5); }, {y, "label 7 at index 1", "0 to 4"});
  const std::string neg = Write("e-neg.npy", Npy(Dict("<i8", "(2,)"), Raw<int64_t>({0, -3})));
  expect([&] { LoadNpyDataset(x, neg); }, {neg, "label -3 at index 1"});
  const std::string half = Write("e-half.npy", Npy(Dict("<f4", "(2,)"), Raw<float>({0, 1.5f})));
  expect([&] { LoadNpyDataset(x, half); }, {half, "label 1.5", "whole number"});
  const std::string grid = Write("e-grid.npy", Npy(Dict("<i4", "(2, 1)"), Raw<int32_t>({0, 1})));
  expect([&] { LoadNpyDataset(x, grid); }, {grid, "[2, 1] '<i4'", "expected [N] (1-D)"});
  const std::string ix = Write("e-ix.npy", Npy(Dict("<i4", "(2, 1)"), Raw<int32_t>({0, 1})));
  expect([&] { LoadNpyDataset(ix, y); }, {ix, "features are '<i4'", "float32"});
  const std::string empty = Write("e-empty.npy", Npy(Dict("<f4", "(0, 3)"), ""));
  expect([&] { LoadNpyDataset(empty, y); }, {empty, "at least one example"});
  expect([&] { LoadNpyDataset(x, y, -1); }, {x, "num_classes is -1"});
}

}  // namespace
}  // namespace data
}  // namespace tandem
