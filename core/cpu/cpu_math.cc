#include "core/cpu/cpu_math.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/cpu/bf16_convert.h"
#include "core/cpu/activation_rows.h"
#include "core/cpu/with_activation.h"
#include "core/dtype.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cpu {
namespace math {
namespace {

int64_t CheckedLabel(const float* labels, int64_t row, int64_t classes) {
  const float label = labels[row];
  const int64_t index = static_cast<int64_t>(label);
  TANDEM_CHECK(index >= 0 && index < classes && static_cast<float>(index) == label)
      << "label " << label << " of row " << row << " is not a class index in [0, " << classes
      << ")";
  return index;
}

int64_t RowArgmax(const float* row, int64_t cols) {
  return std::max_element(row, row + cols) - row;
}

// One row of SoftmaxCrossEntropy: the row's loss (in double), and its
// gradient row when `grad` is not null.
double SoftmaxCrossEntropyRow(const float* row, int64_t label, int64_t classes, float normalizer,
                              float* grad) {
  const float max = *std::max_element(row, row + classes);
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(row[c] - max));
  const double log_sum = std::log(sum);
  if (grad != nullptr) {
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(double(row[c] - max) - log_sum);
      grad[c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) / normalizer);
    }
  }
  return log_sum - double(row[label] - max);
}

}  // namespace

void BiasActivation(const IntraOp& intra, Activation activation, const float* x, const float* bias,
                    float* pre, float* out, int64_t rows, int64_t cols) {
  intra.ForRanges(rows, RowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      ActivateRow(activation, x + r * cols, bias, pre != nullptr ? pre + r * cols : nullptr,
                  out + r * cols, cols);
    }
  });
}

void Binary(const IntraOp& intra, BinaryOp op, const float* a, const float* b, float* out,
            int64_t n) {
  auto apply = [&](auto f) {
    intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
    });
  };
  switch (op) {
    case BinaryOp::kAdd:
      return apply([](float p, float q) { return p + q; });
    case BinaryOp::kSub:
      return apply([](float p, float q) { return p - q; });
    case BinaryOp::kMul:
      return apply([](float p, float q) { return p * q; });
    case BinaryOp::kDiv:
      return apply([](float p, float q) { return p / q; });
  }
}

void Axpy(const IntraOp& intra, float alpha, const float* x, float* y, int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] += alpha * x[i];
  });
}

void Scale(const IntraOp& intra, float alpha, float* x, int64_t n) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] *= alpha;
  });
}

void Fill(const IntraOp& intra, float value, float* x, int64_t n) {
  intra.ForRanges(n, kPieceElements,
                  [&](int64_t begin, int64_t end) { std::fill(x + begin, x + end, value); });
}

void Copy(const IntraOp& intra, const float* src, float* dst, int64_t n) {
  if (src == dst) return;
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    std::copy(src + begin, src + end, dst + begin);
  });
}

void ActivationForward(const IntraOp& intra, Activation activation, const float* x, float* y,
                       int64_t n) {
  WithActivation(activation, [&](auto act) {
    intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = kernel_math::Activate(act(), x[i]);
    });
  });
}

void ActivationBackward(const IntraOp& intra, Activation activation, const float* x,
                        const float* dy, float* dx, int64_t n, bool accumulate) {
  WithActivation(activation, [&](auto act) {
    intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
      if (accumulate) {
        for (int64_t i = begin; i < end; ++i) {
          dx[i] += dy[i] * kernel_math::ActivateGrad(act(), x[i]);
        }
      } else {
        for (int64_t i = begin; i < end; ++i) {
          dx[i] = dy[i] * kernel_math::ActivateGrad(act(), x[i]);
        }
      }
    });
  });
}

// Rows in parallel, each row's loss kept; the losses are added in row order.
void SoftmaxCrossEntropy(const IntraOp& intra, const float* logits, const float* labels,
                         int64_t rows, int64_t classes, float normalizer, float* loss,
                         float* dlogits) {
  std::vector<double> row_loss(static_cast<size_t>(rows));
  intra.ForRanges(rows, RowsPerPiece(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      row_loss[r] =
          SoftmaxCrossEntropyRow(logits + r * classes, CheckedLabel(labels, r, classes), classes,
                                 normalizer, dlogits != nullptr ? dlogits + r * classes : nullptr);
    }
  });
  double total = 0.0;
  for (double l : row_loss) total += l;
  loss[0] = static_cast<float>(total / normalizer);
}

namespace {

// Note [Sums of squares in pieces]
// Mse (and SumOfSquares, its form without a target, which clips gradients)
// sums in double, in an order fixed by n alone: each piece of
// kPieceElements is summed in kLanes interleaved partial sums (element i
// into lane i % kLanes), which are then added pairwise; the pieces' sums
// are added in piece order. The pieces run in parallel, and the lanes give
// the loop independent additions to vectorise, where one running sum is a
// chain of dependent ones; the bits do not depend on the thread count.
constexpr int kLanes = 8;

// Sum over [begin, end) of (pred - target)^2 (target null: zeros), writing
// dpred = 2 (pred - target) / normalizer where kGrad.
template <bool kTarget, bool kGrad>
double SquaredErrors(const float* pred, const float* target, int64_t begin, int64_t end,
                     float normalizer, float* dpred) {
  double lanes[kLanes] = {};
  int64_t i = begin;
  auto one = [&](int64_t at, int lane) {
    const float d = kTarget ? pred[at] - target[at] : pred[at];
    lanes[lane] += static_cast<double>(d) * d;
    if (kGrad) dpred[at] = 2.f * d / normalizer;
  };
  for (; i + kLanes <= end; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) one(i + j, j);
  }
  for (int j = 0; i < end; ++i, ++j) one(i, j);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace

void Mse(const IntraOp& intra, const float* pred, const float* target, int64_t n,
         float normalizer, float* loss, float* dpred) {
  using PieceSum = double (*)(const float*, const float*, int64_t, int64_t, float, float*);
  const PieceSum with_target = dpred ? SquaredErrors<true, true> : SquaredErrors<true, false>;
  const PieceSum without = dpred ? SquaredErrors<false, true> : SquaredErrors<false, false>;
  const PieceSum piece_sum = target != nullptr ? with_target : without;
  std::vector<double> piece_sums(static_cast<size_t>((n + kPieceElements - 1) / kPieceElements));
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t piece = begin; piece < end; piece += kPieceElements) {
      piece_sums[static_cast<size_t>(piece / kPieceElements)] =
          piece_sum(pred, target, piece, std::min(end, piece + kPieceElements), normalizer, dpred);
    }
  });
  double total = 0.0;
  for (double sum : piece_sums) total += sum;
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
    correct += RowArgmax(logits + r * classes, classes) == CheckedLabel(labels, r, classes);
  }
  out[0] = static_cast<float>(correct);
}

namespace {

// The piece [begin, end) of the updated parameters into the working copy.
// Called right after the piece's update, so `param` is read from cache.
void WriteWorking(const float* param, Ptr working, int64_t begin, int64_t end) {
  if (working.data == nullptr) return;
  if (working.dtype == DType::kFloat32) {
    std::copy(param + begin, param + end, static_cast<float*>(working.data) + begin);
    return;
  }
  RoundToBFloat16(param + begin, static_cast<uint16_t*>(working.data) + begin, end - begin);
}

}  // namespace

void SgdUpdate(const IntraOp& intra, const SgdParams& params, float* param, const float* grad,
               float* velocity, int64_t n, Ptr working) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    const SgdParams s = params;  // as in AdamWUpdate
    if (velocity == nullptr) {
      for (int64_t i = begin; i < end; ++i) kernel_math::SgdStep(s, param[i], grad[i], nullptr);
    } else {
      for (int64_t i = begin; i < end; ++i) {
        kernel_math::SgdStep(s, param[i], grad[i], velocity + i);
      }
    }
    WriteWorking(param, working, begin, end);
  });
}

void AdamWUpdate(const IntraOp& intra, const AdamWParams& params, int64_t step, float* param,
                 const float* grad, float* m, float* v, int64_t n, Ptr working) {
  const float bias1 = 1.f - std::pow(params.beta1, static_cast<float>(step));
  const float bias2 = 1.f - std::pow(params.beta2, static_cast<float>(step));
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    // Local copies: the stores below cannot change them, so the loop
    // vectorises.
    const AdamWParams s = params;
    const float b1 = bias1, b2 = bias2;
    for (int64_t i = begin; i < end; ++i) {
      kernel_math::AdamWStep(s, b1, b2, param[i], grad[i], m[i], v[i]);
    }
    WriteWorking(param, working, begin, end);
  });
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
