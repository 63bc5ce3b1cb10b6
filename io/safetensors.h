// Safetensors files: a model's parameters in the format of Hugging Face's
// safetensors library, which PyTorch, JAX and numpy read and write.
//
//   ExportSafetensors("/tmp/mlp.safetensors", *model);   // float32 masters
//   SafetensorsExportOptions half;
//   half.dtype = DType::kBFloat16;
//   ExportSafetensors("/tmp/mlp_bf16.safetensors", *model, half);
//   ...
//   ImportSafetensors("/tmp/mlp.safetensors", *model);  // all or nothing
//
// In Python: `model.load_state_dict(safetensors.torch.load_file(path))`.
// The names are the model's parameter names ("fc1.weight", "fc1.bias") and
// a Linear's weight is [out, in], as in torch.nn.Linear, so a PyTorch model
// whose layers carry the same names loads the file as it is.
//
// The format (the safetensors specification; every integer little-endian):
//
//   u64 N                         bytes of the JSON header that follows
//   N bytes of JSON, UTF-8:       {"__metadata__": {"format": "pt"},
//                                  "fc1.bias": {"dtype": "F32", "shape": [512],
//                                               "data_offsets": [0, 2048]},
//                                  ...}
//                                 padded with spaces to a multiple of 8
//   the data                      each tensor's elements, row-major and
//                                 little-endian, at [begin, end) counted
//                                 from the first byte after the header
//
// Tensors cover the data exactly: no gaps, no overlaps, nothing after the
// last one. WriteSafetensors writes "__metadata__" first (when there is
// any), then the tensors in name order with contiguous data, and replaces
// the file atomically (write a .tmp, fsync, rename) as WriteCheckpoint
// does. ReadSafetensors treats its input as untrusted: it checks the
// header length against the file's size and parses the JSON with
// nlohmann-json, refusing whatever the format does not allow (repeated keys
// included); every malformed input is a tandem::Error whose message starts
// with the path and says what is wrong. No length or shape in the
// file can make it allocate more than the file's size would justify.
#ifndef TANDEM_IO_SAFETENSORS_H_
#define TANDEM_IO_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "layers/layer.h"

namespace tandem {

// One tensor of a safetensors file, as stored.
struct SafetensorsTensor {
  std::string dtype;          // "F32", "BF16", ...: the specification's names
  Shape shape;                // [512, 784]; [] is a scalar (one element)
  std::vector<uint8_t> data;  // NumElements(shape) elements, little-endian

  bool operator==(const SafetensorsTensor& other) const {
    return dtype == other.dtype && shape == other.shape && data == other.data;
  }
};

// A whole file: tensors by name, and the header's "__metadata__".
struct SafetensorsFile {
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a dtype named as the specification names them
// (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64,
// I64, U64); 0 for any other name.
size_t SafetensorsDTypeSize(const std::string& dtype);

// `values` as an F32 tensor (dtype kFloat32) or rounded to BF16 (kBFloat16,
// to nearest even, as Tensor::FromVector rounds). Throws unless `values`
// holds NumElements(shape) floats.
SafetensorsTensor SafetensorsFromFloats(const std::vector<float>& values,
                                        const Shape& shape, DType dtype);
// The elements of an F32 or BF16 tensor as floats (BF16 widens exactly).
// Throws for any other dtype, naming it.
std::vector<float> SafetensorsToFloats(const SafetensorsTensor& tensor);

// Writes `tensors` and `metadata` to `path` atomically. Throws
// tandem::Error starting "writing safetensors <path>" when a tensor is
// inconsistent (unknown dtype, data not shape × dtype bytes, a name that is
// empty, "__metadata__" or not UTF-8) or a file operation fails; the
// previous file, if any, is then untouched.
void WriteSafetensors(const std::string& path,
                      const std::map<std::string, SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and fully validates a safetensors file (see the format above).
SafetensorsFile ReadSafetensors(const std::string& path);

struct SafetensorsExportOptions {
  // kFloat32 writes the float32 masters as they are; kBFloat16 rounds them
  // to BF16 (half the size; what a bf16 model computes with).
  DType dtype = DType::kFloat32;
  // "format": "pt" is what Hugging Face's transformers expects of PyTorch
  // weights; safetensors.torch.load_file reads files with any metadata.
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
};

// Every parameter of `model` (Layer::Parameters(): the float32 masters,
// wherever they live), copied to the host as a safetensors tensor of
// `dtype`. Throws if two parameters share a name.
std::map<std::string, SafetensorsTensor> ParametersToSafetensors(Layer& model,
                                                                 DType dtype);

// WriteSafetensors(path, ParametersToSafetensors(model, options.dtype),
// options.metadata).
void ExportSafetensors(const std::string& path, Layer& model,
                       const SafetensorsExportOptions& options = {});

// Copies the tensors of `file` into `model`'s parameters. Every check comes
// before anything changes: each parameter must be in the file with the same
// shape and dtype F32 or BF16 (BF16 widens exactly), and the file must hold
// nothing else. On failure it throws tandem::Error naming `source` (the
// file's path), the first problems and how many more there are, e.g.
//   "/tmp/mlp.safetensors: does not fit model 'mlp'; nothing was imported:
//    tensor 'fc1.weight' is [256, 784] but the model's is [512, 784]"
// and the model is as it was. On success the working copies of a
// mixed-precision model are refreshed (SyncWorkingCopies). Like Restore,
// call it between steps: the copies run on each device's main lane.
void LoadSafetensors(const SafetensorsFile& file, Layer& model,
                     const std::string& source);

// LoadSafetensors(ReadSafetensors(path), model, path).
void ImportSafetensors(const std::string& path, Layer& model);

namespace internal {

// The bytes WriteSafetensors writes, after the same checks; errors start
// with "writing safetensors <name>".
std::string EncodeSafetensors(
    const std::map<std::string, SafetensorsTensor>& tensors,
    const std::map<std::string, std::string>& metadata,
    const std::string& name = "<memory>");

// Parses a safetensors file held in memory; errors start with `name`.
SafetensorsFile DecodeSafetensors(const uint8_t* data, size_t size,
                                  const std::string& name);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_IO_SAFETENSORS_H_
