// Sums and maxima along a row in interleaved lanes, for the CPU loops of
// row-wise ops (LayerNorm, the softmaxes):
//
//   const float sum = LaneSum(cols, [&](int64_t c) { return row[c]; });
//   const float max = LaneMax(seen, [&](int64_t c) { return scale * row[c]; });
//
// Note [Sums in lanes]
// Rule: a row's float32 sum is taken in kSumLanes partial sums, element c
// into lane c % kSumLanes in column order, and the lanes are then added
// pairwise ((0+1)+(2+3))+((4+5)+(6+7)). The order is fixed by the row's
// length alone, so the bits do not depend on the thread count or the CPU.
// Why: one running sum is a chain of dependent additions, one per element at
// the adder's latency (about 4 cycles); eight independent lanes are one
// vector register the compiler keeps adding into, 8 elements a cycle. The
// rounding differs from a single running sum's in the last bits, as the GPU
// kernels' (tree-ordered) sums already do; tests compare both with float64
// references within a tolerance. A maximum is the same in any order, so
// LaneMax is LaneSum's shape for speed alone.
#ifndef TANDEM_CORE_CPU_LANE_REDUCE_H_
#define TANDEM_CORE_CPU_LANE_REDUCE_H_

#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"

namespace tandem {
namespace cpu {

constexpr int kSumLanes = 8;

// term(c) for c in [0, n), summed as Note [Sums in lanes] says.
template <typename Term>
inline float LaneSum(int64_t n, const Term& term) {
  float lanes[kSumLanes] = {};
  int64_t c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) lanes[j] += term(c + j);
  }
  for (int j = 0; c < n; ++c, ++j) lanes[j] += term(c);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The largest term(c) for c in [0, n), NaN if any is NaN (kernel_math::
// MaxOrNan); -infinity for n == 0.
template <typename Term>
inline float LaneMax(int64_t n, const Term& term) {
  float lanes[kSumLanes];
  for (float& lane : lanes) lane = -INFINITY;
  int64_t c = 0;
  for (; c + kSumLanes <= n; c += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) lanes[j] = kernel_math::MaxOrNan(lanes[j], term(c + j));
  }
  for (int j = 0; c < n; ++c, ++j) lanes[j] = kernel_math::MaxOrNan(lanes[j], term(c));
  float max = lanes[0];
  for (int j = 1; j < kSumLanes; ++j) max = kernel_math::MaxOrNan(max, lanes[j]);
  return max;
}

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_LANE_REDUCE_H_
