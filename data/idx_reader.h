// Reading IDX files, the format of MNIST and Fashion-MNIST, gzip-compressed
// or raw, into host tensors.
//
// An IDX file is a 4-byte magic number (two zero bytes, a type code, the
// number of dimensions), one big-endian uint32 per dimension, then the
// elements in row-major order. Only type 0x08 (unsigned byte) is supported,
// which is all the image datasets use. Every check names the file and says
// what was expected, e.g.
//   "/d/train-images-idx3-ubyte.gz: truncated: header promises 47040000
//    bytes of data ([60000, 28, 28]), found 1000"
//
//   TensorDataset train = LoadFashionMnist(kDefaultFashionMnistDir, true);
//   train.features;  // [60000, 784] float32 in [0, 1], CPU
//   train.labels;    // [60000] float32 class indices 0..9
//   TensorDataset smoke = LoadFashionMnist(dir, false, /*max_examples=*/512);
#ifndef TANDEM_DATA_IDX_READER_H_
#define TANDEM_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace tandem {
namespace data {

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr char kDefaultFashionMnistDir[] =
    "/usr/share/datasets/fashion-mnist";

// The contents of one IDX file of unsigned bytes.
struct IdxArray {
  std::vector<int64_t> dims;  // as in the header, e.g. [60000, 28, 28]
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads and validates a whole IDX file (.gz or raw; zlib reads both).
// Throws tandem::Error naming `path` when the file is missing or unreadable,
// the magic number or type code is wrong, the dimension count is not 1..4,
// a dimension is 0, the element count is 2^31 or more, or the data is
// shorter or longer than the header promises.
IdxArray ReadIdx(const std::string& path);

// Loads an images file ([N, rows, cols]) and a labels file ([N]), checking
// that the counts match and every label is below num_classes: features
// [N, rows * cols] float32 pixels scaled by 1/255 into [0, 1], labels [N]
// float32, name() the images path. max_examples >= 0 keeps only the first max_examples (for
// quick smoke tests); both files are still read and validated in full, so a
// smoke test catches a broken download too.
TensorDataset LoadIdxDataset(const std::string& images_path,
                             const std::string& labels_path,
                             int num_classes = 10, int64_t max_examples = -1);

// Fashion-MNIST's training (60000) or test (10000) split from `dir`, which
// holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. When the directory
// or a file is missing the error names it and says how to install it.
TensorDataset LoadFashionMnist(const std::string& dir, bool train,
                               int64_t max_examples = -1);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_IDX_READER_H_
