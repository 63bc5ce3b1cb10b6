// LtGemm: row-major GEMMs through cuBLASLt (float32 or bfloat16 operands,
// float32 accumulation), for what cublasSgemm cannot do in one call:
//   - write the result to a different buffer than the one it adds to,
//     D = alpha op(A) op(B) + beta C with C != D (Linear's SGD-in-backward
//     reads the old weights as C and writes the new ones as D, while the
//     input-gradient GEMM still reads the old ones);
//   - add a bias and apply ReLU in the GEMM's epilogue, instead of a separate
//     pass over the result (Linear's forward).
// Descriptors and the heuristic's first algorithm are cached per shape; the
// choice is the heuristic's, not timed, so results are reproducible run to
// run. One LtGemm per stream (it shares that stream's cuBLAS workspace); not
// thread-safe (the backend holds a lock around it).
#ifndef TANDEM_CORE_CUDA_LT_GEMM_H_
#define TANDEM_CORE_CUDA_LT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "core/dtype.h"

namespace tandem {
namespace cuda {

struct LtGemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // op(A) is [m, k], op(B) [k, n], C and D [m, n]
  float alpha = 1.f;
  CPtr a, b;                    // one dtype: float32 or bfloat16
  float beta = 0.f;
  CPtr c;                       // may equal d; unused when beta == 0
  Ptr d;                        // c's dtype; float32 when a is
  CPtr bias;                    // [n] added to every row, d's dtype; or none
  bool relu = false;            // max(0, .) after the bias
  bool tf32 = false;            // float32 a and b: TF32 tensor cores
  int sm_count_target = 0;      // plan for this many SMs; 0: all of them
};

class LtGemm {
 public:
  // The handle is created on the current device.
  LtGemm(void* workspace, size_t workspace_bytes);
  ~LtGemm();  // never throws
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Queues the call on `stream`. Returns false, queueing nothing, when
  // cuBLASLt offers no algorithm for it (the caller then does it another
  // way); throws tandem::Error when cuBLASLt fails.
  bool Run(cudaStream_t stream, const LtGemmCall& call);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, cd = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
  };
  // The call's shape, epilogue, math and dtypes, and the alignment (in bytes,
  // up to 256) of each of its four pointers: cuBLASLt's algorithms may need
  // aligned operands, and a view into a flat buffer (a gradient in a bucket)
  // need not be.
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int, bool, int, int, int,
                         std::tuple<int, int, int, int>>;
  Plan& PlanFor(const LtGemmCall& call);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_CORE_CUDA_LT_GEMM_H_
