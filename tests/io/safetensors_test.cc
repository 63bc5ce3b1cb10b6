// Tests io/safetensors.h: round trips of a model's parameters in F32 and
// BF16 on every device, the exact bytes of a small file, a clear error
// naming the file for every kind of malformed input (header length, JSON,
// dtype, offsets, trailing bytes), headers other writers produce, and an
// import that changes nothing unless the whole file fits.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "io/atomic_file.h"
#include "layers/mlp.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "writing " << path;
}

// The message of the tandem::Error that fn throws ("" if none).
template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A file: the 8-byte little-endian length of `json`, `json`, then `data`.
std::string File(const std::string& json, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return out + json + data;
}

SafetensorsFile Decode(const std::string& bytes) {
  return internal::DecodeSafetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                     "bad.safetensors");
}

// The error Decode throws for `bytes`; fails the test when there is none or
// it does not start with the file's name.
std::string DecodeError(const std::string& bytes) {
  const std::string error = ErrorOf([&] { Decode(bytes); });
  EXPECT_EQ(error.rfind("bad.safetensors: ", 0), 0u)
      << "no error naming the file: '" << error << "'";
  return error;
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

// A tensor "w" of `dtype` and `shape` over `bytes` bytes at [0, bytes).
std::string OneTensor(const std::string& dtype, const std::string& shape, size_t bytes) {
  return File("{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[0," +
                  std::to_string(bytes) + "]}}",
              std::string(bytes, '\x01'));
}

std::unique_ptr<Sequential> MakeMlp(uint64_t seed, Device device = Device::Cpu(),
                                    Precision precision = Precision::kFp32,
                                    std::vector<int64_t> sizes = {6, 5, 3}) {
  Rng rng(seed);
  MlpOptions options;
  options.device = device;
  options.precision = precision;
  return Mlp(sizes, Activation::kRelu, rng, options);
}

std::vector<std::vector<float>> Values(Layer& model) {
  std::vector<std::vector<float>> values;
  for (const NamedParameter& p : model.Parameters()) values.push_back(p.value().ToVector());
  return values;
}

// --- The file -------------------------------------------------------------

TEST(SafetensorsFileTest, LayoutIsTheSpecificationsByteForByte) {
  std::map<std::string, SafetensorsTensor> tensors;
  tensors["b"] = SafetensorsFromFloats({1.f}, {}, DType::kBFloat16);
  tensors["a"] = SafetensorsFromFloats({1.f, -2.f}, {2}, DType::kFloat32);
  const std::string json =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[8,10]}}";
  ASSERT_EQ(json.size(), 139u);  // padded with 5 spaces to 144 = 0x90
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + json + "     " +
                               std::string("\0\0\x80\x3F\0\0\0\xC0", 8) +  // 1, -2 (F32)
                               std::string("\x80\x3F", 2);                 // 1 (BF16)
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  EXPECT_EQ(internal::EncodeSafetensors(tensors, metadata), expected);

  const std::string path = TempPath("layout.safetensors");
  WriteSafetensors(path, tensors, metadata);
  EXPECT_EQ(ReadBytes(path), expected);
  struct stat info;
  EXPECT_NE(::stat(TemporaryPathFor(path).c_str(), &info), 0) << "the .tmp file must be renamed";
  const SafetensorsFile back = ReadSafetensors(path);
  EXPECT_EQ(back.tensors, tensors);
  EXPECT_EQ(back.metadata, metadata);
  EXPECT_EQ(SafetensorsToFloats(back.tensors.at("a")), (std::vector<float>{1.f, -2.f}));
}

TEST(SafetensorsFileTest, NoMetadataAndNoTensors) {
  EXPECT_EQ(internal::EncodeSafetensors({}, {}), File("{}      "));
  const SafetensorsFile empty = Decode(File("{}"));
  EXPECT_TRUE(empty.tensors.empty() && empty.metadata.empty());
}

TEST(SafetensorsFileTest, Bf16RoundsToNearestEvenAndWidensExactly) {
  // 1 + 2^-8 is halfway between two bf16 values: ties to even (1.0).
  const std::vector<float> values = {1.f + 1.f / 256, 1.f + 3.f / 256, -0.1f, 3e38f};
  const SafetensorsTensor t = SafetensorsFromFloats(values, {4}, DType::kBFloat16);
  const std::vector<float> back = SafetensorsToFloats(t);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(back[i], RoundToBFloat16(values[i])) << i;
  }
  EXPECT_EQ(back[0], 1.f);
  EXPECT_EQ(back[1], 1.f + 4.f / 256);
}

TEST(SafetensorsFileTest, AcceptsWhatOtherWritersProduce) {
  // json.dumps style: spaces, newlines, fields in another order, metadata
  // last, escapes (é as \u00e9, U+1F600 as a surrogate pair), no padding,
  // a zero-size tensor, an integer dtype.
  const std::string json =
      "{\n \"caf\\u00e9\": {\"shape\": [1], \"data_offsets\": [0, 4], \"dtype\": \"F32\"},\n"
      " \"\\ud83d\\ude00\\\"\\n\": {\"dtype\": \"I64\", \"shape\": [1], "
      "\"data_offsets\": [4, 12]},\n"
      " \"empty\": {\"dtype\": \"BF16\", \"shape\": [0, 3], \"data_offsets\": [12, 12]},\n"
      " \"__metadata__\": {\"a\\tb\": \"\\u0041\"}\n}";
  const SafetensorsFile file = Decode(File(json, std::string(12, '\x02')));
  ASSERT_EQ(file.tensors.size(), 3u);
  EXPECT_EQ(file.tensors.count("caf\xC3\xA9"), 1u);
  EXPECT_EQ(file.tensors.at("\xF0\x9F\x98\x80\"\n").dtype, "I64");
  EXPECT_EQ(file.tensors.at("empty").shape, (Shape{0, 3}));
  EXPECT_EQ(file.metadata.at("a\tb"), "A");
  // What we write from it reads back the same.
  const std::string again = internal::EncodeSafetensors(file.tensors, file.metadata);
  const SafetensorsFile reread = Decode(again);
  EXPECT_EQ(reread.tensors, file.tensors);
  EXPECT_EQ(reread.metadata, file.metadata);
}

TEST(SafetensorsFileTest, WriterRefusesWhatTheReaderWouldReject) {
  const std::string path = TempPath("refused.safetensors");
  SafetensorsTensor t = SafetensorsFromFloats({1.f, 2.f}, {2}, DType::kFloat32);
  std::string error = ErrorOf([&] { WriteSafetensors(path, {{"w", t}}, {}); });
  EXPECT_EQ(error, "");
  t.shape = {3};
  error = ErrorOf([&] { WriteSafetensors(path, {{"w", t}}); });
  EXPECT_CONTAINS(error, "writing safetensors " + path +
                             ": tensor 'w' is F32 [3] (12 bytes) "
                             "but holds 8 bytes");
  t.shape = {2};
  t.dtype = "F17";
  EXPECT_CONTAINS(ErrorOf([&] {
                    WriteSafetensors(path, {{"w", t}});
                  }),
                  "tensor 'w' has dtype 'F17', which is none of BOOL, U8");
  t.dtype = "F32";
  EXPECT_CONTAINS(ErrorOf([&] {
                    WriteSafetensors(path, {{"__metadata__", t}});
                  }),
                  "a tensor may not be named '__metadata__'");
  EXPECT_CONTAINS(ErrorOf([&] { WriteSafetensors(path, {{"bad\xFF", t}}); }), "is not valid UTF-8");
  // The refused writes left the first file as it was.
  EXPECT_EQ(ReadSafetensors(path).tensors.at("w"),
            SafetensorsFromFloats({1.f, 2.f}, {2}, DType::kFloat32));
  EXPECT_CONTAINS(ErrorOf([&] {
                    WriteSafetensors("/nonexistent/dir/x.safetensors", {{"w", t}});
                  }),
                  "writing safetensors /nonexistent/dir/x.safetensors: cannot create "
                  "/nonexistent/dir/x.safetensors.tmp");
  EXPECT_CONTAINS(ErrorOf([&] {
                    SafetensorsToFloats(SafetensorsTensor{"I64", {1}, std::vector<uint8_t>(8)});
                  }),
                  "dtype I64 is neither F32 nor BF16");
}

// --- Malformed files --------------------------------------------------------

TEST(SafetensorsReadTest, MissingFileAndDirectory) {
  EXPECT_CONTAINS(ErrorOf([] { ReadSafetensors("/nonexistent.safetensors"); }),
                  "/nonexistent.safetensors: cannot open safetensors file");
  EXPECT_CONTAINS(ErrorOf([] { ReadSafetensors(::testing::TempDir()); }),
                  ": is a directory, expected a safetensors file");
  // A FIFO is refused at once; a plain open would wait for a writer.
  const std::string fifo = ::testing::TempDir() + "/fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_CONTAINS(ErrorOf([&] { ReadSafetensors(fifo); }),
                  fifo + ": not a regular file, expected a safetensors file");
}

TEST(SafetensorsReadTest, HeaderLengthIsCheckedAgainstTheFileSize) {
  EXPECT_CONTAINS(DecodeError(std::string("\x02\0\0", 3)),
                  "3 bytes, too few for the 8-byte header length");
  std::string huge = File("{}");
  huge[7] = '\x7F';  // a length near 2^63
  EXPECT_CONTAINS(DecodeError(huge),
                  "bytes but only 2 follow it; truncated, or not a safetensors file");
  std::string one_short = File("{}");
  one_short[0] = 3;
  EXPECT_CONTAINS(DecodeError(one_short), "the header length is 3 bytes but only 2 follow it");
  // Every truncation of a valid file is an error naming the file.
  std::map<std::string, SafetensorsTensor> tensors;
  tensors["w"] = SafetensorsFromFloats({1.f, 2.f, 3.f}, {3}, DType::kFloat32);
  const std::string good = internal::EncodeSafetensors(tensors, {{"format", "pt"}});
  for (size_t n = 0; n < good.size(); ++n) DecodeError(good.substr(0, n));
  // The same checks on a file, with its path.
  const std::string path = TempPath("truncated.safetensors");
  WriteBytes(path, good.substr(0, good.size() - 1));
  EXPECT_CONTAINS(ErrorOf([&] { ReadSafetensors(path); }),
                  path +
                      ": tensor 'w' has data_offsets [0, 12], past the end of the data "
                      "(11 bytes after the header); is the file truncated?");
}

// Invalid JSON is named with the byte of the header where nlohmann-json
// stopped and its reason; JSON the format does not allow, with the tensor or
// key at fault.
TEST(SafetensorsReadTest, MalformedHeadersSayWhatIsWrong) {
  struct Case {
    std::string json, error;
  };
  const std::string w = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
  const std::vector<Case> cases = {
      // Not JSON.
      {" {}", "header at byte 0: a header starts with '{', found byte 0x20"},
      {"[]", "header at byte 0: a header starts with '{', found '['"},
      {"{", "header at byte 1: syntax error while parsing object key - unexpected end of input"},
      {"{\"w\" {}}", "header at byte 5: syntax error while parsing object separator - "
                     "unexpected '{'; expected ':'"},
      {"{\"w", "invalid string: missing closing quote"},
      {"{\"a\\x\":{}}", "invalid string: forbidden character after backslash"},
      {"{\"\\u12\":{}}", "'\\u' must be followed by 4 hex digits"},
      {"{\"\\ud800\":{}}", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {"{\"\\udc00\":{}}", "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"},
      {"{\"\xC3\x28\":{}}", "invalid string: ill-formed UTF-8 byte"},
      {"{\"\xC0\xAF\":{}}", "ill-formed UTF-8 byte"},  // an overlong '/'
      {"{\"a\nb\":{}}", "control character U+000A (LF) must be escaped"},
      {"{\"w\":{\"shape\":[01]}}", "header at byte 16: syntax error while parsing array"},
      {"{\"w\":{\"shape\":[1,]}}", "unexpected ']'; expected '[', '{', or a literal"},
      {"{/* c */}", "header at byte 1: syntax error"},
      {"{\"w\":{\"shape\":[1e999]}}", "header: number overflow parsing '1e999'"},
      {w, "header at byte 53: syntax error while parsing object - unexpected end of input; "
          "expected '}'"},
      // An unterminated string is quoted up to 40 bytes.
      {"{\"" + std::string(1000, 'n'), "last read: '\"" + std::string(39, 'n') + "...'"},
      // Only spaces after the closing brace.
      {"{}x", "header at byte 2: syntax error while parsing value - invalid literal"},
      {"{}  \n",
       "header at byte 4: after the header's closing '}' come bytes other than spaces "
       "(found byte 0x0A); only spaces may pad the header"},
      {"{} }", "header at byte 3: syntax error while parsing value - unexpected '}'; "
               "expected end of input"},
      {std::string("{}\0}", 4), "header at byte 2: a NUL byte, which JSON text never holds"},
      {std::string("{\"\0\":{}}", 8), "header at byte 2: a NUL byte"},
      // JSON, but not a safetensors header.
      {"{\"\":{}}", "header: a tensor has an empty name"},
      {w + ",\"w\":{}}", "header: tensor 'w' appears twice"},
      {"{\"w\":[]}", "header: tensor 'w' is an array, not an object of dtype, shape and "
                     "data_offsets"},
      {"{\"w\":{\"dtype\":\"F32\"}}", "header: tensor 'w' lacks \"shape\" \"data_offsets\""},
      {"{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", "header: tensor 'w' has \"dtype\" twice"},
      {"{\"w\":{\"dtype\":\"F32\",\"offsets\":[0,4]}}",
       "header: tensor 'w' has an unknown field \"offsets\" (a tensor has exactly dtype, shape "
       "and data_offsets)"},
      {"{\"w\":{\"dtype\":4}}", "header: the dtype of tensor 'w' is a number (4), not a string"},
      {"{\"w\":{\"shape\":[1.5]}}",
       "header: an element of the shape of tensor 'w' is 1.5, not an integer (JSON without a "
       "fraction or an exponent)"},
      {"{\"w\":{\"shape\":[1e3]}}", "is 1000.0, not an integer"},
      {"{\"w\":{\"shape\":[-1]}}", "an element of the shape of tensor 'w' is negative (-1)"},
      {"{\"w\":{\"shape\":[-0]}}", "an element of the shape of tensor 'w' is negative"},
      {"{\"w\":{\"shape\":[9223372036854775808]}}",
       "an element of the shape of tensor 'w' (9223372036854775808) is larger than 2^63 - 1"},
      {"{\"w\":{\"shape\":[18446744073709551616]}}", "is larger than 2^63 - 1"},
      {"{\"w\":{\"shape\":\"1\"}}",
       "header: the shape of tensor 'w' is a string, not an array of integers"},
      {"{\"w\":{\"shape\":[[1]]}}", "header: the value of \"shape\" nests deeper than a "
                                   "tensor's shape"},
      {"{\"w\":{\"data_offsets\":[0,4,8]}}",
       "header: the data_offsets of tensor 'w' has 3 elements; it is [begin, end]"},
      {"{\"__metadata__\":{\"a\":1}}",
       "header: the value of \"__metadata__\" key \"a\" is a number (1), not a string"},
      {"{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}",
       "header: \"__metadata__\" key \"a\" appears twice"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", "header: \"__metadata__\" appears twice"},
      {"{\"__metadata__\":[]}", "header: \"__metadata__\" is an array, not an object of strings"},
  };
  for (const Case& c : cases) {
    const std::string error = DecodeError(File(c.json));
    EXPECT_CONTAINS(error, "bad.safetensors: malformed safetensors header");
    EXPECT_CONTAINS(error, c.error);
  }
}

TEST(SafetensorsReadTest, DtypeAndSizeMismatches) {
  EXPECT_CONTAINS(DecodeError(OneTensor("F17", "[1]", 4)),
                  "bad.safetensors: tensor 'w' has dtype 'F17', which is none of BOOL, U8, I8");
  EXPECT_CONTAINS(DecodeError(OneTensor("F32", "[3]", 8)),
                  "bad.safetensors: tensor 'w' is F32 [3] (12 bytes) but its data_offsets "
                  "[0, 8] hold 8 bytes");
  EXPECT_CONTAINS(DecodeError(OneTensor("BF16", "[2, 2]", 4)),
                  "tensor 'w' is BF16 [2, 2] (8 bytes)");
  EXPECT_CONTAINS(DecodeError(OneTensor("F64", "[4294967296, 4294967296]", 8)),
                  "tensor 'w' has shape [4294967296, 4294967296], whose size passes 2^63 bytes");
  // A scalar is one element.
  EXPECT_EQ(Decode(OneTensor("I32", "[]", 4)).tensors.at("w").data.size(), 4u);
  EXPECT_EQ(Decode(OneTensor("F16", "[0, 9223372036854775807]", 0)).tensors.size(), 1u);
}

std::string Entry(const std::string& name, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) +
         "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST(SafetensorsReadTest, OffsetsMustTileTheDataExactly) {
  const std::string data(8, '\x03');
  // Listed out of order but contiguous: fine.
  const SafetensorsFile ok =
      Decode(File("{" + Entry("b", 3, 8) + "," + Entry("a", 0, 3) + "}", data));
  EXPECT_EQ(ok.tensors.at("b").data.size(), 5u);
  EXPECT_CONTAINS(DecodeError(File("{" + Entry("a", 0, 4) + "," + Entry("b", 2, 8) + "}", data)),
                  "bad.safetensors: tensors 'a' [0, 4) and 'b' [2, 8) overlap");
  EXPECT_CONTAINS(
      DecodeError(File("{" + Entry("a", 0, 3) + "," + Entry("b", 4, 8) + "}", data)),
      "bad.safetensors: bytes [3, 4) of the data belong to no tensor (a gap before 'b')");
  EXPECT_CONTAINS(DecodeError(File("{" + Entry("a", 1, 8) + "}", data)),
                  "bytes [0, 1) of the data belong to no tensor");
  EXPECT_CONTAINS(DecodeError(File("{" + Entry("a", 0, 6) + "}", data)),
                  "bad.safetensors: 2 trailing bytes after the last tensor's data");
  EXPECT_CONTAINS(DecodeError(File("{}", "xy")), "2 trailing bytes after the last tensor's data");
  EXPECT_CONTAINS(DecodeError(File("{" + Entry("a", 0, 9) + "}", data)),
                  "tensor 'a' has data_offsets [0, 9], past the end of the data (8 bytes");
  EXPECT_CONTAINS(
      DecodeError(File("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[5,4]}}", data)),
      "tensor 'a' has data_offsets [5, 4]: begin after end");
}

// --- A model's parameters ---------------------------------------------------

class SafetensorsModelTest : public DeviceTest {};

TEST_P(SafetensorsModelTest, F32RoundTripIsBitwise) {
  auto a = MakeMlp(1, device());
  const std::string path = TempPath("f32_" + device().ToString() + ".safetensors");
  ExportSafetensors(path, *a);
  const SafetensorsFile file = ReadSafetensors(path);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  ASSERT_EQ(file.tensors.size(), 4u);
  // PyTorch's nn.Linear layout: weight [out, in], bias [out].
  EXPECT_EQ(file.tensors.at("fc1.weight").shape, (Shape{5, 6}));
  EXPECT_EQ(file.tensors.at("fc1.bias").shape, (Shape{5}));
  EXPECT_EQ(file.tensors.at("fc2.weight").dtype, "F32");
  EXPECT_EQ(SafetensorsToFloats(file.tensors.at("fc2.weight")),
            a->Parameters()[2].value().ToVector());

  auto b = MakeMlp(2, device());
  ASSERT_NE(Values(*b), Values(*a));
  ImportSafetensors(path, *b);
  EXPECT_EQ(Values(*b), Values(*a));
}

TEST_P(SafetensorsModelTest, Bf16ExportRoundsTheMastersAndImportsExactly) {
  auto a = MakeMlp(1, device());
  const std::string path = TempPath("bf16_" + device().ToString() + ".safetensors");
  SafetensorsExportOptions options;
  options.dtype = DType::kBFloat16;
  options.metadata = {};
  ExportSafetensors(path, *a, options);
  const SafetensorsFile file = ReadSafetensors(path);
  EXPECT_TRUE(file.metadata.empty());
  const std::vector<float> w = a->Parameters()[0].value().ToVector();
  const SafetensorsTensor& t = file.tensors.at("fc1.weight");
  ASSERT_EQ(t.dtype, "BF16");
  ASSERT_EQ(t.data.size(), 2 * w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const uint16_t bits = static_cast<uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8));
    EXPECT_EQ(bits, FloatToBFloat16Bits(w[i])) << i;
  }
  auto b = MakeMlp(2, device());
  ImportSafetensors(path, *b);
  const auto expected = Values(*a);
  const auto got = Values(*b);
  for (size_t k = 0; k < got.size(); ++k) {
    for (size_t i = 0; i < got[k].size(); ++i)
      EXPECT_EQ(got[k][i], RoundToBFloat16(expected[k][i]));
  }
}

// A bf16 model exports its float32 masters, and an import refreshes the
// working copies it computes with: both models then compute alike.
TEST_P(SafetensorsModelTest, MixedPrecisionModelsExportMastersAndSyncWorkingCopies) {
  auto a = MakeMlp(1, device(), Precision::kBf16);
  const std::string path = TempPath("mixed_" + device().ToString() + ".safetensors");
  ExportSafetensors(path, *a);
  EXPECT_EQ(ReadSafetensors(path).tensors.at("fc1.weight").dtype, "F32");
  auto b = MakeMlp(2, device(), Precision::kBf16);
  ImportSafetensors(path, *b);
  EXPECT_EQ(Values(*b), Values(*a));
  std::vector<float> x(4 * 6);
  Rng rng(3);
  for (float& v : x) v = rng.Normal();
  const Tensor input = Tensor::FromVector(x, {4, 6}, device());
  EXPECT_EQ(b->Forward(input).ToVector(), a->Forward(input).ToVector());
}

INSTANTIATE_DEVICE_TEST_SUITE_P(SafetensorsModelTest);

TEST(SafetensorsImportTest, AFileThatDoesNotFitChangesNothing) {
  auto source = MakeMlp(1, Device::Cpu(), Precision::kFp32, {6, 4, 3});
  std::map<std::string, SafetensorsTensor> tensors =
      ParametersToSafetensors(*source, DType::kFloat32);
  tensors.erase("fc2.bias");            // missing
  tensors["fc2.weight"].dtype = "F16";  // refused: F16 [3, 4]
  tensors["fc2.weight"].data.resize(2 * 12);
  tensors["extra"] = SafetensorsFromFloats({1.f}, {1}, DType::kFloat32);  // matches nothing
  const std::string path = TempPath("misfit.safetensors");
  WriteSafetensors(path, tensors);

  auto model = MakeMlp(2);  // 6-5-3: fc1 and fc2.weight shapes differ
  const auto before = Values(*model);
  const std::string error = ErrorOf([&] { ImportSafetensors(path, *model); });
  EXPECT_CONTAINS(error, path +
                             ": does not fit model 'mlp'; nothing was imported: "
                             "tensor 'fc1.weight' is [4, 6] but the model's is [5, 6]; "
                             "tensor 'fc1.bias' is [4] but the model's is [5]; "
                             "tensor 'fc2.weight' is F16; Tandem imports F32 and BF16");
  EXPECT_CONTAINS(error, "(and 2 more)");
  EXPECT_EQ(Values(*model), before) << "a failed import changed the model";

  // One misfit among tensors that fit: still nothing changes.
  tensors = ParametersToSafetensors(*MakeMlp(3), DType::kFloat32);
  tensors["fc2.bias"] = SafetensorsFromFloats({1.f, 2.f, 3.f, 4.f}, {4}, DType::kFloat32);
  WriteSafetensors(path, tensors);
  EXPECT_CONTAINS(ErrorOf([&] { ImportSafetensors(path, *model); }),
                  "nothing was imported: tensor 'fc2.bias' is [4] but the model's is [3]. "
                  "Names and shapes must be those of the model's parameters");
  EXPECT_EQ(Values(*model), before) << "a failed import changed the model";

  // Each problem alone is named too.
  tensors.erase("fc2.bias");
  WriteSafetensors(path, tensors);
  EXPECT_CONTAINS(ErrorOf([&] { ImportSafetensors(path, *model); }),
                  "the file has no tensor 'fc2.bias' (the model's is [3])");
  tensors = ParametersToSafetensors(*model, DType::kFloat32);
  tensors["fc3.weight"] = SafetensorsFromFloats({1.f}, {1, 1}, DType::kFloat32);
  WriteSafetensors(path, tensors);
  EXPECT_CONTAINS(ErrorOf([&] { ImportSafetensors(path, *model); }),
                  "tensor 'fc3.weight' [1, 1] matches no parameter of the model");
  EXPECT_EQ(Values(*model), before);
}

}  // namespace
}  // namespace tandem
