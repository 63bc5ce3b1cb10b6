// The CPU backend's float32 math (Eigen maps over the operands, no copies),
// GEMMs aside (core/cpu/cpu_gemm.h). cpu_backend.cc runs every op through
// these, widening bfloat16 operands to float32 first and rounding results
// back.
#ifndef TANDEM_CORE_CPU_CPU_MATH_H_
#define TANDEM_CORE_CPU_CPU_MATH_H_

#include <cstdint>

#include "core/backend.h"

namespace tandem {
namespace cpu {
namespace math {

void BiasActivation(Activation activation, const float* x, const float* bias, float* pre,
                    float* out, int64_t rows, int64_t cols);
void ColumnSums(const float* x, int64_t rows, int64_t cols, float alpha, float beta,
                float* out);
void Binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
void Axpy(float alpha, const float* x, float* y, int64_t n);
void Scale(float alpha, float* x, int64_t n);
void ActivationForward(Activation activation, const float* x, float* y, int64_t n);
void ActivationBackward(Activation activation, const float* x, const float* dy, float* dx,
                        int64_t n, bool accumulate);
void SoftmaxCrossEntropy(const float* logits, const float* labels, int64_t rows,
                         int64_t classes, float normalizer, float* loss, float* dlogits);
void Mse(const float* pred, const float* target, int64_t n, float normalizer, float* loss,
         float* dpred);
void Argmax(const float* x, int64_t rows, int64_t cols, float* out);
void CountCorrect(const float* logits, const float* labels, int64_t rows, int64_t classes,
                  float* out);
void SgdUpdate(const SgdParams& params, float* param, const float* grad, float* velocity,
               int64_t n);
void AdamWUpdate(const AdamWParams& params, int64_t step, float* param, const float* grad,
                 float* m, float* v, int64_t n);

}  // namespace math
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_MATH_H_
