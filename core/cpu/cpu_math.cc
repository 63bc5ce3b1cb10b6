#include "core/cpu/cpu_math.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

using RowMajor =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajor>;
using MatrixMap = Eigen::Map<RowMajor>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;

int64_t CheckedLabel(const float* labels, int64_t row, int64_t classes) {
  const float label = labels[row];
  const int64_t index = static_cast<int64_t>(label);
  TANDEM_CHECK(index >= 0 && index < classes && static_cast<float>(index) == label)
      << "label " << label << " of row " << row << " is not a class index in [0, "
      << classes << ")";
  return index;
}

int64_t RowArgmax(const float* row, int64_t cols) {
  return std::max_element(row, row + cols) - row;
}

}  // namespace

void BiasActivation(Activation activation, const float* x, const float* bias, float* pre,
                    float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* outr = out + r * cols;
    float* prer = pre ? pre + r * cols : nullptr;
    for (int64_t c = 0; c < cols; ++c) {
      const float z = xr[c] + bias[c];
      if (prer) prer[c] = z;
      outr[c] = kernel_math::Activate(activation, z);
    }
  }
}

void ColumnSums(const float* x, int64_t rows, int64_t cols, float alpha, float beta,
                float* out) {
  VectorMap o(out, cols);
  if (beta == 0.f) o.setZero(); else o *= beta;
  if (rows == 0) return;
  o += alpha * ConstMatrixMap(x, rows, cols).colwise().sum().transpose();
}

void Binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  ConstVectorMap A(a, n), B(b, n);
  VectorMap O(out, n);
  switch (op) {
    case BinaryOp::kAdd: O = A + B; break;
    case BinaryOp::kSub: O = A - B; break;
    case BinaryOp::kMul: O = A.cwiseProduct(B); break;
    case BinaryOp::kDiv: O = A.cwiseQuotient(B); break;
  }
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
  VectorMap(y, n) += alpha * ConstVectorMap(x, n);
}

void Scale(float alpha, float* x, int64_t n) {
  VectorMap(x, n) *= alpha;
}

void ActivationForward(Activation activation, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = kernel_math::Activate(activation, x[i]);
}

void ActivationBackward(Activation activation, const float* x, const float* dy, float* dx,
                        int64_t n, bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i] * kernel_math::ActivateGrad(activation, x[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

void SoftmaxCrossEntropy(const float* logits, const float* labels, int64_t rows,
                         int64_t classes, float normalizer, float* loss, float* dlogits) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    const int64_t label = CheckedLabel(labels, r, classes);
    const float max = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(row[c] - max));
    const double log_sum = std::log(sum);
    total += log_sum - double(row[label] - max);
    if (dlogits != nullptr) {
      float* grad = dlogits + r * classes;
      for (int64_t c = 0; c < classes; ++c) {
        const double p = std::exp(double(row[c] - max) - log_sum);
        grad[c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) / normalizer);
      }
    }
  }
  loss[0] = static_cast<float>(total / normalizer);
}

void Mse(const float* pred, const float* target, int64_t n, float normalizer, float* loss,
         float* dpred) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = pred[i] - target[i];
    total += double(d) * d;
    if (dpred != nullptr) dpred[i] = 2.f * d / normalizer;
  }
  loss[0] = static_cast<float>(total / normalizer);
}

void Argmax(const float* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = static_cast<float>(RowArgmax(x + r * cols, cols));
  }
}

void CountCorrect(const float* logits, const float* labels, int64_t rows, int64_t classes,
                  float* out) {
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    correct += RowArgmax(logits + r * classes, classes) ==
               CheckedLabel(labels, r, classes);
  }
  out[0] = static_cast<float>(correct);
}

void SgdUpdate(const SgdParams& params, float* param, const float* grad, float* velocity,
               int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    kernel_math::SgdStep(params, param[i], grad[i],
                         velocity ? velocity + i : nullptr);
  }
}

void AdamWUpdate(const AdamWParams& params, int64_t step, float* param, const float* grad,
                 float* m, float* v, int64_t n) {
  const float bias1 = 1.f - std::pow(params.beta1, static_cast<float>(step));
  const float bias2 = 1.f - std::pow(params.beta2, static_cast<float>(step));
  for (int64_t i = 0; i < n; ++i) {
    kernel_math::AdamWStep(params, bias1, bias2, param[i], grad[i], m[i], v[i]);
  }
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
