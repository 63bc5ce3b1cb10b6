// Reading NumPy .npy files, and a labelled dataset from two of them.
//
// A .npy file (numpy.save, format versions 1.0, 2.0 and 3.0) is the magic
// "\x93NUMPY", a version, the length of a header, the header (a Python
// dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (60000,
// 784), }) and the elements in C (row-major) order. Supported dtypes:
// '<f4' (float32), '<f8' (float64), '|u1' (uint8), '<i4' (int32) and '<i8'
// (int64), little-endian, C order. Every check names the file and says what
// was expected, e.g.
//   "/d/x.npy: unsupported dtype '<f2'; supported: '<f4', '<f8', '|u1',
//    '<i4', '<i8' (little-endian); convert with x.astype(np.float32)"
//
// Write the files with numpy:
//   np.save("features.npy", x.astype(np.float32))   # [N, ...] float32 or uint8
//   np.save("labels.npy", y.astype(np.int64))       # [N] class indices
// and load them:
//   TensorDataset train = LoadNpyDataset("features.npy", "labels.npy");
#ifndef TANDEM_DATA_NPY_READER_H_
#define TANDEM_DATA_NPY_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace tandem {
namespace data {

enum class NpyDType { kFloat32, kFloat64, kUInt8, kInt32, kInt64 };

// "'<f4'", as numpy spells the dtype in the header.
const char* NpyDTypeName(NpyDType dtype);
// Bytes per element: 4, 8, 1, 4, 8.
size_t NpyItemSize(NpyDType dtype);

// The contents of one .npy file.
struct NpyArray {
  NpyDType dtype = NpyDType::kFloat32;
  std::vector<int64_t> shape;  // as in the header; [] for a scalar
  std::vector<uint8_t> data;   // C order, little-endian, num_elements() items

  int64_t num_elements() const;
};

// Reads and validates a whole .npy file. Throws tandem::Error naming `path`
// when the file is missing or unreadable, the magic or version is wrong, the
// header is truncated, is not a dict with 'descr', 'fortran_order' and
// 'shape', names an unsupported dtype or fortran_order True, or the data is
// shorter or longer than the shape promises.
NpyArray ReadNpy(const std::string& path);

// A dataset from a features file ([N, ...]: float32, float64 or uint8,
// flattened to [N, F]; uint8 is multiplied by uint8_scale, float64 is
// rounded to float32) and a labels file ([N]: uint8, int32, int64, or
// float32/float64 holding whole numbers). num_classes 0 takes the largest
// label + 1. Throws naming the file for a dtype or shape that does not
// fit, counts that differ, or a label that is negative, not whole, or not
// below num_classes. name() is features_path.
TensorDataset LoadNpyDataset(const std::string& features_path,
                             const std::string& labels_path,
                             int64_t num_classes = 0,
                             float uint8_scale = 1.f / 255);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_DATA_NPY_READER_H_
