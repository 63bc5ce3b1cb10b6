// The CPU backend's loops for the math ops of core/ops_math.h. As in
// cpu_math.h, arithmetic is on float32 arrays (cpu_backend.cc widens
// bfloat16 operands first and rounds results back once); the ops that only
// move elements (Transpose, GatherRows) copy them bit for bit in their own
// dtype, and ScatterAddRows widens and rounds one touched table row at a
// time, so no op copies a whole bfloat16 table. The element-wise and
// row-wise ops spread over `intra`'s threads in pieces of whole rows (or
// elements), each row computed as on one thread: the same bits on any
// number of threads.
#ifndef TANDEM_CORE_CPU_CPU_MATH_OPS_H_
#define TANDEM_CORE_CPU_CPU_MATH_OPS_H_

#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {
namespace math {

void Unary(const IntraOp& intra, UnaryOp op, const float* x, float* out, int64_t n);
void BinaryScalar(const IntraOp& intra, BinaryOp op, const float* x, float s, float* out,
                  int64_t n);
void BroadcastBinary(const IntraOp& intra, BinaryOp op, Broadcast how, const float* x,
                     const float* v, float* out, int64_t rows, int64_t cols);
// Sums in float32, in column order.
void RowReduce(const IntraOp& intra, RowReduction op, const float* x, int64_t rows,
               int64_t cols, float* out);
// out may be x.
void Softmax(const IntraOp& intra, const float* x, float* out, int64_t rows, int64_t cols);
// Elements of `element_bytes` (2 or 4) bytes.
void Transpose(const void* x, void* out, int64_t rows, int64_t cols, size_t element_bytes);

// Throws, naming `op`, the first position whose index is not a whole number
// in [0, table_rows).
void CheckRowIndices(const char* op, const float* indices, int64_t n, int64_t table_rows);
// Valid indices (CheckRowIndices); elements of `element_bytes` bytes.
void GatherRows(const void* table, const float* indices, int64_t n, int64_t cols,
                size_t element_bytes, void* out);
// Valid indices; table of either dtype. Each touched row: widened, summed
// in float32 in the order of the positions, rounded once.
void ScatterAddRows(const float* src, const float* indices, int64_t n, int64_t cols,
                    Ptr table);

}  // namespace math
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_MATH_OPS_H_
