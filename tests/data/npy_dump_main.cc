// The Tandem side of npy_numpy_test: loads .npy files that numpy wrote and
// prints what data/npy_reader.h made of them, for npy_numpy_check.py to
// compare with numpy's own values.
//
//   npy_dump --read PATH                      dtype and shape of ReadNpy(PATH)
//   npy_dump FEATURES LABELS [NUM_CLASSES]    LoadNpyDataset, every value
//
// Values print with 9 significant digits, enough to round-trip a float32.
// An error prints "error: <text>" and exits 1.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "data/npy_reader.h"

namespace {

void PrintValues(const char* what, const std::vector<float>& values) {
  std::printf("%s", what);
  for (float v : values) std::printf(" %.9g", v);
  std::printf("\n");
}

int Run(int argc, char** argv) {
  using namespace tandem::data;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--read") {
    const NpyArray array = ReadNpy(args[1]);
    std::printf("dtype %s\nshape", NpyDTypeName(array.dtype));
    for (int64_t d : array.shape) std::printf(" %lld", static_cast<long long>(d));
    std::printf("\n");
    return 0;
  }
  if (args.size() != 2 && args.size() != 3) {
    std::fprintf(stderr, "usage: npy_dump --read PATH | FEATURES LABELS [NUM_CLASSES]\n");
    return 2;
  }
  const TensorDataset d =
      LoadNpyDataset(args[0], args[1], args.size() == 3 ? std::stoll(args[2]) : 0);
  std::printf("size %lld\nfeature_size %lld\nnum_classes %lld\n",
              static_cast<long long>(d.size()), static_cast<long long>(d.feature_size()),
              static_cast<long long>(d.num_classes()));
  PrintValues("features", d.features.ToVector());
  PrintValues("labels", d.labels.ToVector());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
