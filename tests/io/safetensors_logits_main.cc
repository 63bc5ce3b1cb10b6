// safetensors_logits: the Tandem side of tests/io/safetensors_numpy_check.py.
//
// Builds the Fashion-MNIST MLP of the example (784-512-256-10, ReLU, seed
// 42), then either trains it for a few AdamW steps on the first training
// images and exports its parameters, or imports parameters from a file; in
// both cases it writes the logits of the first 16 test images (and those
// images) as .npy files, which numpy reads with np.load:
//
//   safetensors_logits --export=m.safetensors --export_bf16=m16.safetensors
//                      --inputs=x.npy --logits=y.npy
//   safetensors_logits --import=numpy.safetensors --logits=y2.npy
//
// Without the dataset (Debian's dataset-fashion-mnist) it says so and uses
// fixed pseudo-random images and labels instead; the inputs it used are in
// --inputs either way.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "data/idx_reader.h"
#include "io/safetensors.h"
#include "layers/loss.h"
#include "layers/mlp.h"
#include "layers/optimizer.h"

namespace tandem {
namespace {

constexpr int64_t kImages = 16;   // test images whose logits are written
constexpr int64_t kTrain = 640;   // training images the steps draw from
constexpr int64_t kBatch = 64;
constexpr int64_t kPixels = 28 * 28;

struct Options {
  std::string data_dir = data::kDefaultFashionMnistDir;
  std::string export_f32, export_bf16, import, inputs, logits;
  int steps = 10;
  Device device = Device::Cpu();
};

Options ParseFlags(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    TANDEM_CHECK(arg.rfind("--", 0) == 0 && eq != std::string::npos)
        << "expected --flag=value, got '" << arg << "'";
    const std::string flag = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    if (flag == "data_dir") o.data_dir = value;
    else if (flag == "export") o.export_f32 = value;
    else if (flag == "export_bf16") o.export_bf16 = value;
    else if (flag == "import") o.import = value;
    else if (flag == "inputs") o.inputs = value;
    else if (flag == "logits") o.logits = value;
    else if (flag == "steps") o.steps = std::stoi(value);
    else if (flag == "device") o.device = ParseDevice(value);
    else TANDEM_CHECK(false) << "unknown flag --" << flag;
  }
  return o;
}

// A .npy file (format version 1.0) of float32 `values` with `shape`.
void WriteNpy(const std::string& path, const std::vector<float>& values, const Shape& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // (16, 10) but (16,)
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6), version (2), length (2), header and '\n': a multiple of 64.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  TANDEM_CHECK(file.good()) << "cannot write " << path;
}

bool HaveDataset(const std::string& dir) {
  return std::ifstream(dir + "/t10k-images-idx3-ubyte.gz").good() &&
         std::ifstream(dir + "/train-images-idx3-ubyte.gz").good();
}

// The first `n` images of a split, pixels in [0, 1], and their labels; or,
// without the dataset, fixed pseudo-random ones.
data::TensorDataset Images(const Options& o, bool train, int64_t n) {
  if (HaveDataset(o.data_dir)) return data::LoadFashionMnist(o.data_dir, train, n);
  Rng rng(train ? 1 : 2);
  std::vector<float> pixels(n * kPixels), labels(n);
  for (float& p : pixels) p = rng.Uniform();
  for (float& l : labels) l = static_cast<float>(rng.UniformInt(10));
  return data::TensorDataset(Tensor::FromVector(pixels, {n, kPixels}),
                             Tensor::FromVector(labels, {n}), 10, "random images");
}

// A few AdamW steps, so the exported weights are not the initial ones.
void Train(const Options& o, Layer& model) {
  const data::TensorDataset train = Images(o, /*train=*/true, kTrain);
  auto optimizer = MakeOptimizer(OptimizerConfig{}, model.Parameters());
  SoftmaxCrossEntropyLoss loss;
  for (int step = 0; step < o.steps; ++step) {
    const int64_t begin = (step * kBatch) % kTrain;
    optimizer->ZeroGrad();
    loss.Forward(model.Forward(train.features.Slice(begin, begin + kBatch).To(o.device)),
                 train.labels.Slice(begin, begin + kBatch).To(o.device));
    model.Backward(loss.Backward());
    optimizer->Step();
  }
}

int Run(const Options& o) {
  if (!HaveDataset(o.data_dir)) {
    std::cerr << "safetensors_logits: no Fashion-MNIST in " << o.data_dir
              << " (apt-get install dataset-fashion-mnist); using fixed random images\n";
  }
  Rng rng(42);
  MlpOptions mlp;
  mlp.device = o.device;
  auto model = Mlp({kPixels, 512, 256, 10}, Activation::kRelu, rng, mlp);
  if (!o.import.empty()) {
    ImportSafetensors(o.import, *model);
  } else {
    Train(o, *model);
  }
  if (!o.export_f32.empty()) ExportSafetensors(o.export_f32, *model);
  if (!o.export_bf16.empty()) {
    SafetensorsExportOptions bf16;
    bf16.dtype = DType::kBFloat16;
    ExportSafetensors(o.export_bf16, *model, bf16);
  }
  const data::TensorDataset test = Images(o, /*train=*/false, kImages);
  if (!o.inputs.empty()) WriteNpy(o.inputs, test.features.ToVector(), test.features.shape());
  model->SetTraining(false);
  const Tensor logits = model->Forward(test.features.To(o.device));
  if (!o.logits.empty()) WriteNpy(o.logits, logits.ToVector(), logits.shape());
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  try {
    return tandem::Run(tandem::ParseFlags(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "safetensors_logits: " << e.what() << "\n";
    return 1;
  }
}
