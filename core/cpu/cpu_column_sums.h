// The CPU backend's column sums (bias gradients), alone and fused with the
// activation gradient, on float32 or bfloat16 operands read as they are:
//
//   cpu::ColumnSums(intra, x, rows, cols, 1.f, 0.f, sums);
//   cpu::ActivationBackwardColumnSums(intra, Activation::kRelu, x, dy, dz,
//                                     rows, cols, 0.f, sums);
//
// Note [Column sum order]
// Rule: every column adds its rows in a fixed order, the one Eigen's vectorised
// colwise sum uses, so that the sums are Eigen's bit for bit. A column that
// falls in a whole vector packet of the output's aligned stretch (Eigen's
// packet and alignment for float: 8 floats and 32 bytes with AVX) adds the
// first row, then (r[i] + r[i+1]) + (r[i+2] + r[i+3]) for i = 1, 5, ...
// while i < (rows - 1) rounded down to a multiple of 4, then the remaining
// rows one at a time; every other column (before the first aligned packet,
// after the last whole one) adds its rows one at a time. Then
// out = (beta == 0 ? 0 : beta out) + alpha sum.
// Mechanism: the columns are cut into tiles of kColumnTile, each summed by
// one thread reading its rows front to back (so memory streams in, instead
// of 8 columns at a time down all rows); the tiles do not change any
// column's order, so the bits depend neither on the thread count nor on the
// tiling. tests/core/cpu_column_sums_test.cc checks them against Eigen's
// expression. A bfloat16 operand is widened a row's tile at a time in
// cache, and the fused pass sums dz as stored (rounded, for bfloat16), so it
// gives the bits of ActivationBackward followed by ColumnSums.
#ifndef TANDEM_CORE_CPU_CPU_COLUMN_SUMS_H_
#define TANDEM_CORE_CPU_CPU_COLUMN_SUMS_H_

#include <cstdint>

#include "core/backend.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {

// out [cols] = alpha colsum(x [rows, cols]) + beta out; out is not read
// when beta is 0.
void ColumnSums(const IntraOp& intra, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, float* out);

// dz = dy * activation'(x) (dz may be dy), and sums = colsum(dz) + beta
// sums, in one pass.
void ActivationBackwardColumnSums(const IntraOp& intra, Activation activation, CPtr x, CPtr dy,
                                  Ptr dz, int64_t rows, int64_t cols, float beta, float* sums);

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_COLUMN_SUMS_H_
