// Fuzz target for data/idx_reader.h: ReadIdx on arbitrary bytes, raw or
// (when the bytes start like gzip) through zlib.
//
// Built two ways (see tests/fuzz/BUILD and tools/fuzz.sh):
//   clang++ -fsanitize=fuzzer,address ...   libFuzzer explores for minutes;
//   a gcc cc_test with fuzz_main.cc          CI replays seeds + mutations.
//
// What counts as a bug: anything but a clean return or tandem::Error
// (another exception type, a crash, a sanitizer report, a huge allocation),
// or a result that breaks ReadIdx's promises (1..4 dims, each >= 1, data
// holding exactly product(dims) bytes, fewer than 2^31).
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "data/idx_reader.h"

namespace {

// The input as a file without touching the disk: ReadIdx takes a path, and
// /proc/self/fd/N of a memfd is one.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("idx_fuzz_input", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  void Set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 ||
        (size > 0 && ::pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size))) {
      std::perror("writing the memfd");
      std::abort();
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "ReadIdx broke its contract: %s\n", what);
    std::abort();
  }
}

std::string Idx(const std::vector<uint32_t>& dims, size_t data_bytes,
                uint8_t type = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(type),
                       static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<char>(d >> shift));
  }
  for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<char>(i * 37));
  return bytes;
}

std::string Gzip(const std::string& raw) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer, as .gz files have.
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    std::abort();
  }
  std::string out(deflateBound(&z, raw.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile* file = new MemFile();  // never freed: lives for the run
  file->Set(data, size);
  try {
    const tandem::data::IdxArray array = tandem::data::ReadIdx(file->path());
    Require(!array.dims.empty() && array.dims.size() <= 4, "dimension count");
    uint64_t elements = 1;
    for (int64_t d : array.dims) {
      Require(d >= 1, "a dimension below 1");
      elements *= static_cast<uint64_t>(d);
      Require(elements < (uint64_t{1} << 31), "2^31 or more elements");
    }
    Require(array.data.size() == elements, "data size != product(dims)");
  } catch (const tandem::Error&) {
    // Expected for malformed input; the message is the product.
  }
  return 0;
}

// The seed corpus: small valid files of each shape, raw and gzip-compressed,
// plus the near misses a reader must reject.
std::vector<std::string> TandemFuzzSeeds() {
  std::vector<std::string> raw = {
      Idx({5}, 5),                    // labels
      Idx({2, 3, 3}, 18),             // images
      Idx({1, 2, 2, 2}, 8),           // 4-D
      Idx({1}, 1),
      Idx({3, 2}, 5),                 // truncated data
      Idx({2}, 3),                    // a trailing byte
      Idx({2}, 2, 0x0D),              // float32: unsupported type
      Idx({0, 4}, 0),                 // a zero dimension
      Idx({65536, 65536}, 0),         // 2^32 elements
      Idx({0x7FFFFFFF}, 16),          // 2^31 - 1 promised, 16 present
  };
  std::vector<std::string> seeds = raw;
  for (size_t i = 0; i < 4; ++i) seeds.push_back(Gzip(raw[i]));
  seeds.push_back(Gzip(raw[9]));
  return seeds;
}
