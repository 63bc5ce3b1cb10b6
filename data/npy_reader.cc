#include "data/npy_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace data {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr char kSupported[] =
    "supported: '<f4', '<f8', '|u1', '<i4', '<i8' (little-endian)";
// Class indices are stored as float32, exact up to 2^24.
constexpr int64_t kMaxClasses = int64_t{1} << 24;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

// A file read front to back; every short read throws naming the file and
// what was being read.
class NpyFile {
 public:
  explicit NpyFile(const std::string& path) : path_(path) {
    struct stat info;
    TANDEM_CHECK(::stat(path.c_str(), &info) == 0)
        << path << ": cannot open: " << std::strerror(errno);
    TANDEM_CHECK(!S_ISDIR(info.st_mode))
        << path << ": is a directory, expected a .npy file";
    // A FIFO or a device would block the open below, or never end.
    TANDEM_CHECK(S_ISREG(info.st_mode))
        << path << ": not a regular file (a FIFO, socket or device), expected a .npy file";
    file_.reset(std::fopen(path.c_str(), "rb"));
    TANDEM_CHECK(file_ != nullptr)
        << path << ": cannot open: " << std::strerror(errno);
    remaining_ = static_cast<uint64_t>(info.st_size);
  }

  uint64_t remaining() const { return remaining_; }

  void Read(void* dst, size_t bytes, const char* what) {
    const size_t got = bytes == 0 ? 0 : std::fread(dst, 1, bytes, file_.get());
    remaining_ -= std::min<uint64_t>(remaining_, got);
    TANDEM_CHECK(got == bytes) << path_ << ": truncated: expected " << bytes
                               << " bytes of " << what << ", found " << got;
  }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  uint64_t remaining_ = 0;
};

struct Header {
  bool has_descr = false, has_fortran = false, has_shape = false;
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header's Python dict literal: keys 'descr' (a string),
// 'fortran_order' (True or False) and 'shape' (a tuple of integers).
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path)
      : text_(text), path_(path) {}

  Header Parse() {
    Header header;
    Expect('{', "a dict");
    while (!Consume('}')) {
      const std::string key = String("a key");
      Expect(':', "':' after the key");
      if (key == "descr") {
        header.descr = String("a dtype string such as '<f4'");
        header.has_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = Bool();
        header.has_fortran = true;
      } else if (key == "shape") {
        header.shape = Shape();
        header.has_shape = true;
      } else {
        Fail("a key 'descr', 'fortran_order' or 'shape', found '" + key + "'");
      }
      if (Consume(',')) continue;
      Expect('}', "',' or '}' after a value");
      break;
    }
    SkipSpace();
    if (pos_ != text_.size()) Fail("nothing after the dict's '}'");
    if (!header.has_descr || !header.has_fortran || !header.has_shape) {
      Fail("the keys 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void Fail(const std::string& expected) const {
    std::string shown = text_.substr(0, 200);
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    TANDEM_CHECK(false) << path_ << ": bad .npy header: expected " << expected
                        << " at character " << pos_ << " of the header \""
                        << shown << (text_.size() > 200 ? "..." : "") << "\"";
    std::abort();  // not reached: the check throws
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c, const char* expected) {
    if (!Consume(c)) Fail(expected);
  }
  std::string String(const char* expected) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) Fail(expected);
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) Fail("a closing quote");
    std::string value = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return value;
  }
  bool Bool() {
    SkipSpace();
    for (const char* word : {"True", "False"}) {
      if (text_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return word[0] == 'T';
      }
    }
    Fail("True or False for 'fortran_order'");
  }
  int64_t Integer() {
    SkipSpace();
    int64_t value = 0;
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) {
        Fail("a dimension below 2^63");
      }
      value = value * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start) Fail("a dimension (a non-negative integer)");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
    return value;
  }
  std::vector<int64_t> Shape() {
    Expect('(', "a tuple '(...)' for 'shape'");
    std::vector<int64_t> shape;
    while (!Consume(')')) {
      shape.push_back(Integer());
      if (!Consume(',')) {
        Expect(')', "',' or ')' in 'shape'");
        break;
      }
    }
    return shape;
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// The dtype of a 'descr', or a throw naming what was found.
NpyDType ParseDType(const std::string& descr, const std::string& path) {
  if (descr == "<f4") return NpyDType::kFloat32;
  if (descr == "<f8") return NpyDType::kFloat64;
  if (descr == "|u1" || descr == "<u1" || descr == ">u1") return NpyDType::kUInt8;
  if (descr == "<i4") return NpyDType::kInt32;
  if (descr == "<i8") return NpyDType::kInt64;
  const bool big_endian = !descr.empty() && descr[0] == '>';
  TANDEM_CHECK(false) << path << ": unsupported dtype '" << descr << "'"
                      << (big_endian ? " (big-endian)" : "") << "; " << kSupported
                      << "; convert with x.astype(np.float32) (features) or "
                         "x.astype(np.int64) (labels) before np.save";
  std::abort();  // not reached
}

// Reads the magic, the version and the header text.
std::string ReadHeaderText(NpyFile& file, const std::string& path) {
  char magic[kMagicBytes];
  file.Read(magic, kMagicBytes, "magic string (\\x93NUMPY)");
  TANDEM_CHECK(std::memcmp(magic, kMagic, kMagicBytes) == 0)
      << path << ": not a .npy file: it does not start with the magic string "
      << "\\x93NUMPY (write it with numpy.save)";
  uint8_t version[2];
  file.Read(version, 2, "format version");
  TANDEM_CHECK(version[0] >= 1 && version[0] <= 3 && version[1] == 0)
      << path << ": unsupported .npy format version " << int{version[0]} << "."
      << int{version[1]} << "; supported: 1.0, 2.0, 3.0";
  // 1.0: a little-endian uint16 length; 2.0 and 3.0: a uint32.
  const size_t length_bytes = version[0] == 1 ? 2 : 4;
  uint8_t length[4] = {0, 0, 0, 0};
  file.Read(length, length_bytes, "header length");
  const uint64_t header_bytes = uint64_t{length[0]} | uint64_t{length[1]} << 8 |
                                uint64_t{length[2]} << 16 | uint64_t{length[3]} << 24;
  TANDEM_CHECK(header_bytes <= file.remaining())
      << path << ": truncated: the header is " << header_bytes
      << " bytes long, but only " << file.remaining() << " bytes follow";
  std::string text(header_bytes, '\0');
  file.Read(&text[0], text.size(), "header");
  return text;
}

int64_t CountElements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

// "[60000, 28, 28] '|u1'"
std::string Describe(const NpyArray& array) {
  return ShapeToString(Shape(array.shape.begin(), array.shape.end())) + " " +
         NpyDTypeName(array.dtype);
}

}  // namespace

const char* NpyDTypeName(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kFloat32:
      return "'<f4'";
    case NpyDType::kFloat64:
      return "'<f8'";
    case NpyDType::kUInt8:
      return "'|u1'";
    case NpyDType::kInt32:
      return "'<i4'";
    case NpyDType::kInt64:
      return "'<i8'";
  }
  return "'?'";
}

size_t NpyItemSize(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kUInt8:
      return 1;
    case NpyDType::kFloat32:
    case NpyDType::kInt32:
      return 4;
    case NpyDType::kFloat64:
    case NpyDType::kInt64:
      return 8;
  }
  return 1;
}

int64_t NpyArray::num_elements() const { return CountElements(shape); }

NpyArray ReadNpy(const std::string& path) {
  NpyFile file(path);
  const std::string text = ReadHeaderText(file, path);
  const Header header = HeaderParser(text, path).Parse();
  NpyArray array;
  array.dtype = ParseDType(header.descr, path);
  TANDEM_CHECK(!header.fortran_order)
      << path << ": fortran_order is True; expected C order (write "
      << "np.ascontiguousarray(x), or x.copy(order='C'))";
  array.shape = header.shape;
  // The data must be exactly what the shape promises; dividing first keeps
  // the byte count itself from overflowing.
  const uint64_t available = file.remaining();
  uint64_t expected = NpyItemSize(array.dtype);
  bool fits = true;  // false: the byte count overflows 64 bits
  for (int64_t d : array.shape) {
    const uint64_t size = static_cast<uint64_t>(d);
    if (size != 0 && expected > std::numeric_limits<uint64_t>::max() / size) fits = false;
    if (!fits) break;
    expected *= size;
  }
  TANDEM_CHECK(fits && expected <= available)
      << path << ": truncated: shape " << Describe(array) << " needs "
      << (fits ? std::to_string(expected) : std::string("more")) << " bytes of data, found "
      << available;
  TANDEM_CHECK(expected == available)
      << path << ": " << available - expected << " bytes after the " << expected
      << " bytes of data that shape " << Describe(array)
      << " needs; expected the data to end the file";
  array.data.resize(expected);
  file.Read(array.data.data(), array.data.size(), "data");
  return array;
}

namespace {

// Element i of a numeric array, as a double.
double ElementAt(const NpyArray& array, int64_t i) {
  const uint8_t* p = array.data.data() + i * NpyItemSize(array.dtype);
  switch (array.dtype) {
    case NpyDType::kUInt8:
      return *p;
    case NpyDType::kFloat32: {
      float v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case NpyDType::kFloat64: {
      double v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case NpyDType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case NpyDType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, sizeof(v));
      return static_cast<double>(v);
    }
  }
  return 0;
}

// [N, ...] float32, float64 or uint8 as [N, F] float32.
Tensor LoadFeatures(const std::string& path, float uint8_scale) {
  const NpyArray array = ReadNpy(path);
  TANDEM_CHECK(array.dtype == NpyDType::kFloat32 || array.dtype == NpyDType::kFloat64 ||
               array.dtype == NpyDType::kUInt8)
      << path << ": features are " << NpyDTypeName(array.dtype)
      << ", expected float32 ('<f4'), float64 ('<f8') or uint8 ('|u1')";
  TANDEM_CHECK(!array.shape.empty() && array.shape[0] > 0)
      << path << ": features are " << Describe(array)
      << ", expected [N, ...] with at least one example";
  const int64_t count = array.shape[0];
  const int64_t width = array.num_elements() / count;
  TANDEM_CHECK(width > 0) << path << ": features are " << Describe(array)
                          << ", expected at least one feature per example";
  Tensor features = Tensor::Empty({count, width});
  float* x = features.data();
  const int64_t n = array.num_elements();
  if (array.dtype == NpyDType::kFloat32) {
    std::memcpy(x, array.data.data(), n * sizeof(float));
  } else if (array.dtype == NpyDType::kUInt8) {
    for (int64_t i = 0; i < n; ++i) x[i] = array.data[i] * uint8_scale;
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(ElementAt(array, i));
  }
  return features;
}

// [N] class indices as float32, checking each; sets num_classes when 0.
Tensor LoadLabels(const std::string& path, int64_t& num_classes) {
  const NpyArray array = ReadNpy(path);
  TANDEM_CHECK(array.shape.size() == 1)
      << path << ": labels are " << Describe(array) << ", expected [N] (1-D)";
  const int64_t count = array.shape[0];
  std::vector<double> values(count);
  double largest = -1;
  for (int64_t i = 0; i < count; ++i) {
    values[i] = ElementAt(array, i);
    TANDEM_CHECK(values[i] >= 0 && std::floor(values[i]) == values[i] &&
                 values[i] < kMaxClasses)
        << path << ": label " << values[i] << " at index " << i
        << " is not a class index: expected a whole number 0 to "
        << kMaxClasses - 1;
    largest = std::max(largest, values[i]);
  }
  if (num_classes == 0) num_classes = static_cast<int64_t>(largest) + 1;
  TANDEM_CHECK(num_classes >= 1)
      << path << ": cannot infer num_classes from no labels; pass num_classes";
  for (int64_t i = 0; i < count; ++i) {
    TANDEM_CHECK(values[i] < num_classes)
        << path << ": label " << values[i] << " at index " << i
        << " is out of range: expected 0 to " << num_classes - 1
        << " (num_classes = " << num_classes << ")";
  }
  Tensor labels = Tensor::Empty({count});
  float* y = labels.data();
  for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(values[i]);
  return labels;
}

}  // namespace

TensorDataset LoadNpyDataset(const std::string& features_path,
                             const std::string& labels_path, int64_t num_classes,
                             float uint8_scale) {
  TANDEM_CHECK(num_classes >= 0 && num_classes <= kMaxClasses)
      << "LoadNpyDataset(" << features_path << "): num_classes is " << num_classes
      << ", expected 0 (the largest label + 1) to " << kMaxClasses;
  Tensor features = LoadFeatures(features_path, uint8_scale);
  Tensor labels = LoadLabels(labels_path, num_classes);
  TANDEM_CHECK(features.dim(0) == labels.dim(0))
      << features_path << " has " << features.dim(0) << " examples but "
      << labels_path << " has " << labels.dim(0) << " labels; expected the same count";
  return TensorDataset(std::move(features), std::move(labels), num_classes,
                       features_path);
}

}  // namespace data
}  // namespace tandem
