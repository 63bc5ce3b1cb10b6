// The CUDA kernels of the op table's math ops (core/ops_math.h): each queues one kernel
// (core/cuda/kernels_math.h) on the stream of the lane it is given, with no
// scratch memory and no host wait, so every lane may run them.
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/op_table.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels_math.h"

namespace tandem {
namespace cuda {
namespace op_kernels {

void Unary(const Lane& lane, UnaryOp op, CPtr x, Ptr out, int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Unary(context.StreamOf(lane, "Unary"), op, x, out, n);
}

void BinaryScalar(const Lane& lane, BinaryOp op, CPtr x, float s, Ptr out,
                  int64_t n) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::BinaryScalar(context.StreamOf(lane, "BinaryScalar"), op, x, s, out, n);
}

void BroadcastBinary(const Lane& lane, BinaryOp op, Broadcast how, CPtr x,
                     CPtr v, Ptr out, int64_t rows, int64_t cols) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::BroadcastBinary(context.StreamOf(lane, "BroadcastBinary"), op, how, x, v, out, rows,
                           cols);
}

void RowReduce(const Lane& lane, RowReduction op, CPtr x, int64_t rows,
               int64_t cols, Ptr out) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::RowReduce(context.StreamOf(lane, "RowReduce"), op, x, rows, cols, out);
}

void Softmax(const Lane& lane, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Softmax(context.StreamOf(lane, "Softmax"), x, out, rows, cols);
}

void Transpose(const Lane& lane, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::Transpose(context.StreamOf(lane, "Transpose"), x, out, rows, cols);
}

void GatherRows(const Lane& lane, CPtr table, int64_t table_rows,
                const float* indices, int64_t n, int64_t cols, Ptr out) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::GatherRows(context.StreamOf(lane, "GatherRows"), table, table_rows, indices, n, cols,
                      out);
}

void ScatterAddRows(const Lane& lane, CPtr src, const float* indices, int64_t n,
                    int64_t cols, Ptr table, int64_t table_rows) {
  CudaContext& context = ContextOf(lane);
  DeviceGuard guard(context.index());
  kernels::ScatterAddRows(context.StreamOf(lane, "ScatterAddRows"), src, indices, n, cols, table,
                          table_rows);
}

}  // namespace op_kernels
}  // namespace cuda
}  // namespace tandem
