// Whether cuBLAS may use TF32 tensor cores for fp32 GEMMs, for every CUDA
// context (existing and future); takes effect at each context's next GEMM.
// The default is false, or true when TANDEM_ALLOW_TF32=1 is set in the
// environment when this is first consulted.
#ifndef TANDEM_CORE_CUDA_TF32_H_
#define TANDEM_CORE_CUDA_TF32_H_

namespace tandem {
namespace cuda {

void SetAllowTf32(bool allow);
bool AllowTf32();

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_TF32_H_
