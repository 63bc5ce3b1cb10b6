// The CPU backend's float32 math over the operands' memory (no copies),
// GEMMs aside (core/cpu/cpu_gemm.h). cpu_backend.cc runs every op through
// these, widening bfloat16 operands to float32 first and rounding results
// back.
//
// Each function spreads its work over `intra`'s threads in pieces that do
// not depend on the thread count, and reduces in a fixed order (a loss adds
// its rows' losses in row order), so results are the same bits on any
// number of threads. Column sums are in cpu_column_sums.h.
#ifndef TANDEM_CORE_CPU_CPU_MATH_H_
#define TANDEM_CORE_CPU_CPU_MATH_H_

#include <cstdint>

#include "core/backend.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {
namespace math {

void BiasActivation(const IntraOp& intra, Activation activation, const float* x, const float* bias,
                    float* pre, float* out, int64_t rows, int64_t cols);
void Binary(const IntraOp& intra, BinaryOp op, const float* a, const float* b, float* out,
            int64_t n);
void Axpy(const IntraOp& intra, float alpha, const float* x, float* y, int64_t n);
void Scale(const IntraOp& intra, float alpha, float* x, int64_t n);
void ActivationForward(const IntraOp& intra, Activation activation, const float* x, float* y,
                       int64_t n);
void ActivationBackward(const IntraOp& intra, Activation activation, const float* x,
                        const float* dy, float* dx, int64_t n, bool accumulate);
void SoftmaxCrossEntropy(const IntraOp& intra, const float* logits, const float* labels,
                         int64_t rows, int64_t classes, float normalizer, float* loss,
                         float* dlogits);
// target null: zeros (a sum of squares). See Note [Sums of squares in pieces].
void Mse(const IntraOp& intra, const float* pred, const float* target, int64_t n,
         float normalizer, float* loss, float* dpred);
void Argmax(const float* x, int64_t rows, int64_t cols, float* out);
void CountCorrect(const float* logits, const float* labels, int64_t rows, int64_t classes,
                  float* out);
void Fill(const IntraOp& intra, float value, float* x, int64_t n);
void Copy(const IntraOp& intra, const float* src, float* dst, int64_t n);
// The optimizer updates also write the updated parameters into `working`
// (float32, or bfloat16 rounded to nearest even; nowhere when its data is
// null) in the same pass, while they are in cache.
void SgdUpdate(const IntraOp& intra, const SgdParams& params, float* param, const float* grad,
               float* velocity, int64_t n, Ptr working = {});
void AdamWUpdate(const IntraOp& intra, const AdamWParams& params, int64_t step, float* param,
                 const float* grad, float* m, float* v, int64_t n, Ptr working = {});

}  // namespace math
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_MATH_H_
