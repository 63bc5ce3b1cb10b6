#include "data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "core/check.h"

namespace tandem {
namespace data {

namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr int kMaxDims = 4;
// Element counts are kept below 2^31 so that no reader downstream (and no
// int-sized gzread length) can overflow; real image datasets are far smaller.
constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();

const char* IdxTypeName(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

std::string Hex(uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*X", digits, value);
  return text;
}

std::string InstallHint() {
  return "install it with `sudo apt-get install dataset-fashion-mnist` "
         "(Debian) or pass --data_dir";
}

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// A gzip (or, transparently, raw) file opened for reading. Reads stop only
// at end of file or on an error, which throws naming the file.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    // stat first: gzopen's errno is not reliable for every failure, and
    // "is a directory" deserves its own message.
    struct stat info;
    TANDEM_CHECK(::stat(path.c_str(), &info) == 0)
        << path << ": cannot open: " << std::strerror(errno);
    TANDEM_CHECK(!S_ISDIR(info.st_mode))
        << path << ": is a directory, expected an IDX file";
    // A FIFO or a device would block the open below, or never end.
    TANDEM_CHECK(S_ISREG(info.st_mode))
        << path << ": not a regular file (a FIFO, socket or device), expected an IDX file";
    file_bytes_ = static_cast<uint64_t>(info.st_size);
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    TANDEM_CHECK(file_ != nullptr)
        << path << ": cannot open: "
        << (errno != 0 ? std::strerror(errno) : "zlib could not allocate");
    // A larger buffer than zlib's 8 KiB default: the training images are
    // 26 MB compressed.
    gzbuffer(file_.get(), 1 << 18);
  }

  // Reads up to n bytes into dst; returns how many were read.
  size_t Read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t done = 0;
    while (done < n) {
      // gzread takes an unsigned length and returns an int: read in chunks.
      const unsigned chunk =
          static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_.get(), out + done, chunk);
      CheckZlib(got);
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  // An upper bound on the bytes the file can still yield, for reserving
  // memory: its size when read raw, 1032 times that when gzip (deflate's
  // maximum expansion). Valid once something has been read.
  uint64_t MaxDecodedBytes() const {
    constexpr uint64_t kMaxDeflateRatio = 1032;
    if (gzdirect(file_.get())) return file_bytes_;
    return file_bytes_ > std::numeric_limits<uint64_t>::max() / kMaxDeflateRatio
               ? std::numeric_limits<uint64_t>::max()
               : file_bytes_ * kMaxDeflateRatio;
  }

 private:
  // A gzip stream that ends early or is corrupt shows as a zlib error, not
  // as a short read; report it as such.
  void CheckZlib(int got) {
    int code = Z_OK;
    const char* message = gzerror(file_.get(), &code);
    TANDEM_CHECK(got >= 0 && (code == Z_OK || code == Z_STREAM_END))
        << path_ << ": truncated or corrupt gzip stream (zlib: " << message
        << ")";
  }

  std::string path_;
  uint64_t file_bytes_ = 0;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

// [60000, 28, 28]
std::string DimsToString(const std::vector<int64_t>& dims) {
  return ShapeToString(Shape(dims.begin(), dims.end()));
}

std::string ReadableFile(const std::string& path, const char* what) {
  struct stat info;
  TANDEM_CHECK(::stat(path.c_str(), &info) == 0 && !S_ISDIR(info.st_mode))
      << path << ": Fashion-MNIST " << what << " not found; " << InstallHint();
  return path;
}

// Reads the magic number and the dimension sizes, checking each; returns the
// dimensions, e.g. [60000, 28, 28].
std::vector<int64_t> ReadHeader(GzReader& reader, const std::string& path) {
  std::array<uint8_t, 4> magic{};
  const size_t magic_bytes = reader.Read(magic.data(), magic.size());
  TANDEM_CHECK(magic_bytes == magic.size())
      << path << ": truncated: an IDX header needs 4 bytes of magic number, "
      << "found " << magic_bytes;
  const uint32_t magic_value = (uint32_t{magic[0]} << 24) |
                               (uint32_t{magic[1]} << 16) |
                               (uint32_t{magic[2]} << 8) | magic[3];
  TANDEM_CHECK(magic[0] == 0 && magic[1] == 0)
      << path << ": not an IDX file: magic number " << Hex(magic_value, 8)
      << ", expected 0x0000TTNN (two zero bytes, type code TT, dimension "
      << "count NN)";
  TANDEM_CHECK(magic[2] == kTypeUnsignedByte)
      << path << ": unsupported IDX type code " << Hex(magic[2], 2) << " ("
      << IdxTypeName(magic[2]) << "); only 0x08 (unsigned byte) is supported";
  const int num_dims = magic[3];
  TANDEM_CHECK(num_dims >= 1 && num_dims <= kMaxDims)
      << path << ": bad IDX header: " << num_dims
      << " dimensions, expected 1 to " << kMaxDims;

  std::vector<uint8_t> header(4 * num_dims);
  const size_t header_bytes = reader.Read(header.data(), header.size());
  TANDEM_CHECK(header_bytes == header.size())
      << path << ": truncated: the header promises " << num_dims
      << " dimension sizes (" << header.size() << " bytes), found "
      << header_bytes << " bytes";

  std::vector<int64_t> dims;
  for (int d = 0; d < num_dims; ++d) {
    const uint8_t* b = &header[4 * d];  // big-endian uint32
    dims.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) |
                   (int64_t{b[2]} << 8) | int64_t{b[3]});
  }
  return dims;
}

// The product of `dims`, checking that each is at least 1 and the product
// stays below kMaxElements.
int64_t CountElements(const std::vector<int64_t>& dims,
                      const std::string& path) {
  int64_t num_elements = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t size = dims[d];
    TANDEM_CHECK(size > 0) << path << ": bad IDX header: dimension " << d
                           << " of " << DimsToString(dims)
                           << " is 0, expected at least 1";
    // Dividing first keeps the product itself from overflowing.
    TANDEM_CHECK(num_elements <= kMaxElements / size)
        << path << ": bad IDX header: dimensions " << DimsToString(dims)
        << " make 2^31 or more elements, expected fewer";
    num_elements *= size;
  }
  return num_elements;
}

// Reads the `num_elements` data bytes into array.data; throws if the file
// ends first.
void ReadData(GzReader& reader, const std::string& path, int64_t num_elements,
              IdxArray& array) {
  // The header's promise does not size the allocation: a 12-byte file may
  // promise 2 GiB (the fuzzer found exactly that). Reserve no more than the
  // file can hold, then grow the buffer only as bytes arrive.
  const size_t expected = static_cast<size_t>(num_elements);
  array.data.reserve(static_cast<size_t>(
      std::min<uint64_t>(expected, reader.MaxDecodedBytes())));
  size_t data_bytes = 0;
  while (data_bytes < expected) {
    const size_t want = std::min<size_t>(expected - data_bytes, size_t{1} << 20);
    array.data.resize(data_bytes + want);
    const size_t got = reader.Read(array.data.data() + data_bytes, want);
    data_bytes += got;
    if (got < want) break;
  }
  array.data.resize(data_bytes);
  TANDEM_CHECK(data_bytes == expected)
      << path << ": truncated: header promises " << num_elements
      << " bytes of data (" << DimsToString(array.dims) << "), found "
      << data_bytes;
}

// Trailing bytes mean the header and the data disagree (a wrong header, or
// two files concatenated); silently ignoring them would hide that.
void CheckNoTrailingBytes(GzReader& reader, const std::string& path,
                          int64_t num_elements, const IdxArray& array) {
  std::array<uint8_t, 4096> rest;
  size_t trailing = 0;
  for (size_t got; (got = reader.Read(rest.data(), rest.size())) > 0;) {
    trailing += got;
  }
  TANDEM_CHECK(trailing == 0)
      << path << ": " << trailing << " trailing bytes after the "
      << num_elements << " bytes of data the header promises ("
      << DimsToString(array.dims) << ")";
}

}  // namespace

IdxArray ReadIdx(const std::string& path) {
  GzReader reader(path);
  IdxArray array;
  array.dims = ReadHeader(reader, path);
  const int64_t num_elements = CountElements(array.dims, path);
  ReadData(reader, path, num_elements, array);
  CheckNoTrailingBytes(reader, path, num_elements, array);
  return array;
}

TensorDataset LoadIdxDataset(const std::string& images_path,
                             const std::string& labels_path, int num_classes,
                             int64_t max_examples) {
  TANDEM_CHECK(num_classes > 0)
      << "num_classes must be at least 1, got " << num_classes;
  const IdxArray images = ReadIdx(images_path);
  const IdxArray labels = ReadIdx(labels_path);
  TANDEM_CHECK(images.dims.size() == 3)
      << images_path << ": expected images [count, rows, cols] (3-D), got "
      << images.dims.size() << "-D " << DimsToString(images.dims);
  TANDEM_CHECK(labels.dims.size() == 1)
      << labels_path << ": expected labels [count] (1-D), got "
      << labels.dims.size() << "-D " << DimsToString(labels.dims);
  TANDEM_CHECK(images.dims[0] == labels.dims[0])
      << images_path << " has " << images.dims[0] << " images but "
      << labels_path << " has " << labels.dims[0]
      << " labels; expected the same count";
  // Validate every label, not only the kept ones, so a bad file is caught
  // by any run that reads it.
  for (size_t i = 0; i < labels.data.size(); ++i) {
    TANDEM_CHECK(labels.data[i] < num_classes)
        << labels_path << ": label " << int{labels.data[i]} << " at index " << i
        << " is out of range: expected 0 to " << num_classes - 1
        << " (num_classes = " << num_classes << ")";
  }

  const int64_t count = max_examples < 0
                            ? images.dims[0]
                            : std::min(images.dims[0], max_examples);
  const int64_t features = images.dims[1] * images.dims[2];
  Tensor pixels = Tensor::Empty({count, features});
  Tensor classes = Tensor::Empty({count});
  float* x = pixels.data();
  for (int64_t i = 0; i < count * features; ++i) x[i] = images.data[i] / 255.f;
  float* y = classes.data();
  for (int64_t i = 0; i < count; ++i) y[i] = labels.data[i];
  return TensorDataset(std::move(pixels), std::move(classes), num_classes,
                       images_path);
}

TensorDataset LoadFashionMnist(const std::string& dir, bool train,
                               int64_t max_examples) {
  struct stat info;
  TANDEM_CHECK(::stat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
      << dir << ": Fashion-MNIST directory not found; " << InstallHint();
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  // Checked one after the other so the first missing file is the one named.
  const std::string images =
      ReadableFile(prefix + "-images-idx3-ubyte.gz", "images file");
  const std::string labels =
      ReadableFile(prefix + "-labels-idx1-ubyte.gz", "labels file");
  return LoadIdxDataset(images, labels, /*num_classes=*/10, max_examples);
}

}  // namespace data
}  // namespace tandem
