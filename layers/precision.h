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
//         On a device that does not multiply bfloat16 (a CPU without
//         bfloat16 dot products) bf16 computes as fp32 does (Note [bf16
//         where the device does not multiply bfloat16]).
//
//   LinearOptions options;
//   options.precision = ParsePrecision("bf16");
//   PrecisionPolicy policy{options.precision};
//   policy.compute_dtype(GetBackend(Device::Cuda(0)));   // DType::kBFloat16
//
// Note [bf16 where the device does not multiply bfloat16]
// Rule: bf16 lets a layer compute in bfloat16; it computes so where the
// device's backend multiplies bfloat16 (Backend::MultipliesBFloat16: a GPU,
// a CPU with AVX-512 BF16), and elsewhere in float32, as fp32 does, with
// float32 activations and no working copies. tf32 is the same kind of
// permission: TF32 GEMMs where the GPU has TF32 tensor cores.
// Why: where the CPU has no bfloat16 arithmetic its GEMMs widen bfloat16 to
// float32 and multiply in float32 anyway, so bfloat16 there only adds
// conversions: every activation rounded as it is written and widened as it
// is read, which made the training step slower than fp32's. Computed in
// float32 it is fp32's step, bit for bit (docs/benchmarks.md, "bf16 on a
// CPU"), and no less accurate. What it gives up is the halved activation
// memory, which a CPU's memory rarely needs.
// Mechanism: compute_dtype(backend) and has_working_copies(backend) ask the
// backend of the layer's parameters; a layer keeps an empty working-copy
// placeholder whenever its precision is bf16 and hands it out in
// Parameters() only where has_working_copies, so MoveTo (layers/layer.h)
// gives a layer moved between such devices its working copies, or drops
// them.
#ifndef TANDEM_LAYERS_PRECISION_H_
#define TANDEM_LAYERS_PRECISION_H_

#include <string>

#include "core/backend.h"
#include "core/dtype.h"

namespace tandem {

enum class Precision { kFp32, kTf32, kBf16 };

// "fp32", "tf32", "bf16".
const char* PrecisionName(Precision precision);
// Parses one of those; the error names --precision and the valid values.
Precision ParsePrecision(const std::string& text);

// What a precision means for a layer's math on a device.
struct PrecisionPolicy {
  Precision precision = Precision::kFp32;

  // Whether the precision is bf16, on whatever device.
  bool bf16() const { return precision == Precision::kBf16; }
  // The dtype of activations and of the working copies of parameters on
  // `backend`: bfloat16 for bf16 where the backend multiplies bfloat16,
  // float32 otherwise (Note [bf16 where the device does not multiply
  // bfloat16]).
  DType compute_dtype(const Backend& backend) const {
    return bf16() && backend.MultipliesBFloat16() ? DType::kBFloat16 : DType::kFloat32;
  }
  // Whether parameters on `backend` keep a working copy beside their
  // float32 masters.
  bool has_working_copies(const Backend& backend) const {
    return compute_dtype(backend) != DType::kFloat32;
  }
  // Whether float32 GEMMs may use TF32 tensor cores.
  bool tf32() const { return precision == Precision::kTf32; }
  // The precision's name, and for bf16 on a backend that does not multiply
  // bfloat16 what it computes in: "bf16 (computed in float32: the device
  // does not multiply bfloat16)".
  std::string Describe(const Backend& backend) const;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_PRECISION_H_
