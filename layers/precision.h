// Precision: how a model computes, chosen per model (the --precision flag).
//
//   fp32: float32 activations, parameters and GEMMs (no TF32), so results
//         match the CPU backend to float32 rounding.
//   tf32: float32 tensors; GEMMs on TF32 tensor cores (10-bit mantissa
//         inputs, float32 accumulation) where the GPU has them.
//   bf16: activations and the working copies of parameters in bfloat16,
//         GEMMs in bfloat16 with float32 accumulation; float32 master
//         parameters (what the optimizer updates and checkpoints keep),
//         float32 gradients, and losses, softmax and reductions in float32.
//         Where the device widens bfloat16 to float32 for GEMMs (a CPU
//         without bfloat16 dot products), Linear's GEMMs read float32
//         wherever it has it instead: the masters, float32 data, and its own
//         activation gradients (Note [Float32 operands where bfloat16 is
//         widened] in layers/linear.h).
//
//   LinearOptions options;
//   options.precision = ParsePrecision("bf16");
//   PrecisionPolicy policy{options.precision};
//   policy.compute_dtype();   // DType::kBFloat16
#ifndef TANDEM_LAYERS_PRECISION_H_
#define TANDEM_LAYERS_PRECISION_H_

#include <string>

#include "core/dtype.h"

namespace tandem {

enum class Precision { kFp32, kTf32, kBf16 };

// "fp32", "tf32", "bf16".
const char* PrecisionName(Precision precision);
// Parses one of those; the error names --precision and the valid values.
Precision ParsePrecision(const std::string& text);

// What a precision means for a layer's math.
struct PrecisionPolicy {
  Precision precision = Precision::kFp32;

  // The dtype of activations and of the working copies of parameters.
  DType compute_dtype() const {
    return precision == Precision::kBf16 ? DType::kBFloat16 : DType::kFloat32;
  }
  // Whether float32 GEMMs may use TF32 tensor cores.
  bool tf32() const { return precision == Precision::kTf32; }
  // Whether parameters keep a working copy beside their float32 masters.
  bool has_working_copies() const { return compute_dtype() != DType::kFloat32; }
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_PRECISION_H_
