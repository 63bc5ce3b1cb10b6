#include "core/cuda/lt_gemm.h"

#include <cstdint>
#include <cstdio>
#include <tuple>

#include "core/cuda/cuda_check.h"

namespace tandem {
namespace cuda {

// Row-major through column-major cuBLASLt, as in cuda::op_kernels::Gemm: a
// row-major [r, c] matrix is a column-major [c, r] one, so cuBLASLt computes
// D^T [n, m] = op(B)^T op(A)^T, with B passed first. Its "rows" are then
// our columns, so the bias epilogue (one value per row of D^T) adds bias[j]
// to column j of our D, which is what a layer's bias is.

LtGemm::LtGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

LtGemm::~LtGemm() {
  for (auto& entry : plans_) {
    Plan& p = entry.second;
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.cd) cublasLtMatrixLayoutDestroy(p.cd);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  const cublasStatus_t status = cublasLtDestroy(handle_);
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "tandem: ignoring %s in cublasLtDestroy\n",
                 internal::CublasErrorText(status).c_str());
  }
}

namespace {
cudaDataType_t CudaType(DType dtype) {
  return dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// The largest power of two, up to 256, that divides the address.
int Alignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  int alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// Tells the heuristic how aligned the operands are, so that it picks an
// algorithm that can run on them. A, B, C, D in cuBLASLt's order: our b, a,
// c and d (Note in the .cc's header comment).
cublasStatus_t SetAlignments(cublasLtMatmulPreference_t preference,
                             std::tuple<int, int, int, int> alignments) {
  const uint32_t values[4] = {static_cast<uint32_t>(std::get<0>(alignments)),
                              static_cast<uint32_t>(std::get<1>(alignments)),
                              static_cast<uint32_t>(std::get<2>(alignments)),
                              static_cast<uint32_t>(std::get<3>(alignments))};
  const cublasLtMatmulPreferenceAttributes_t attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, attributes[i], &values[i], sizeof(values[i]));
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

LtGemm::Plan& LtGemm::PlanFor(const LtGemmCall& call) {
  const bool has_bias = call.bias.data != nullptr;
  const int epilogue = (has_bias ? 1 : 0) | (call.relu ? 2 : 0);
  const void* c_data = call.beta == 0.f ? call.d.data : call.c.data;
  const std::tuple<int, int, int, int> alignments{Alignment(call.b.data), Alignment(call.a.data),
                                                  Alignment(c_data), Alignment(call.d.data)};
  const Key key{call.trans_a, call.trans_b, call.m, call.n, call.k, epilogue,
                call.tf32, call.sm_count_target, static_cast<int>(call.a.dtype),
                static_cast<int>(call.d.dtype), alignments};
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  Plan& p = plans_[key];
  const bool tf32 = call.tf32 && call.a.dtype == DType::kFloat32;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &p.desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_b = call.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = call.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                              &op_b, sizeof(op_b)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                              &op_a, sizeof(op_a)));
  const cublasLtEpilogue_t kind =
      has_bias ? (call.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
               : (call.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                              &kind, sizeof(kind)));
  if (has_bias) {
    const cudaDataType_t bias_type = CudaType(call.bias.dtype);
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  if (call.sm_count_target > 0) {
    const int32_t sms = call.sm_count_target;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
  }
  // Stored column-major shapes: B is [k, n] row-major, i.e. [n, k]
  // column-major, unless transposed; likewise A.
  const uint64_t m = static_cast<uint64_t>(call.m), n = static_cast<uint64_t>(call.n),
                 k = static_cast<uint64_t>(call.k);
  const cudaDataType_t ab = CudaType(call.a.dtype), cd = CudaType(call.d.dtype);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, call.trans_b ? k : n, call.trans_b ? n : k,
                                          static_cast<int64_t>(call.trans_b ? k : n)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, call.trans_a ? m : k, call.trans_a ? k : m,
                                          static_cast<int64_t>(call.trans_a ? m : k)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.cd, cd, n, m, static_cast<int64_t>(n)));
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t bytes = workspace_bytes_;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
  if (status == CUBLAS_STATUS_SUCCESS) status = SetAlignments(preference, alignments);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.cd, p.cd,
                                            preference, 1, &result, &returned);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  // "Not supported" (e.g. an epilogue this cuBLASLt lacks for fp32) leaves
  // the plan unusable; the caller falls back. Anything else is an error.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
  p.usable = status == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (p.usable) p.algo = result.algo;
  return p;
}

bool LtGemm::Run(cudaStream_t stream, const LtGemmCall& call) {
  Plan& p = PlanFor(call);
  if (!p.usable) return false;
  if (call.bias.data != nullptr) {
    const void* bias = call.bias.data;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &bias, sizeof(bias)));
  }
  const void* c = call.beta == 0.f ? call.d.data : call.c.data;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &call.alpha, call.b.data, p.a, call.a.data,
                              p.b, &call.beta, c, p.cd, call.d.data, p.cd, &p.algo,
                              workspace_, workspace_bytes_, stream))
      << "cublasLtMatmul m=" << call.m << " n=" << call.n << " k=" << call.k
      << " trans_a=" << call.trans_a << " trans_b=" << call.trans_b;
  return true;
}

}  // namespace cuda
}  // namespace tandem
