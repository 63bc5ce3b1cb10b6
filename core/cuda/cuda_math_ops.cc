// The math ops of core/ops_math.h on CudaContext: each queues one kernel
// (core/cuda/kernels_math.h) on the stream of the lane it is given, with no
// scratch memory and no host wait, so every lane may run them.
#include "core/check.h"
#include "core/cuda/context.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/kernels_math.h"

namespace tandem {
namespace cuda {

void CudaContext::Unary(const Lane& lane, UnaryOp op, CPtr x, Ptr out, int64_t n) {
  DeviceGuard guard(device_);
  kernels::Unary(StreamOf(lane, "Unary"), op, x, out, n);
}

void CudaContext::BinaryScalar(const Lane& lane, BinaryOp op, CPtr x, float s, Ptr out,
                               int64_t n) {
  DeviceGuard guard(device_);
  kernels::BinaryScalar(StreamOf(lane, "BinaryScalar"), op, x, s, out, n);
}

void CudaContext::BroadcastBinary(const Lane& lane, BinaryOp op, Broadcast how, CPtr x,
                                  CPtr v, Ptr out, int64_t rows, int64_t cols) {
  DeviceGuard guard(device_);
  kernels::BroadcastBinary(StreamOf(lane, "BroadcastBinary"), op, how, x, v, out, rows, cols);
}

void CudaContext::RowReduce(const Lane& lane, RowReduction op, CPtr x, int64_t rows,
                            int64_t cols, Ptr out) {
  DeviceGuard guard(device_);
  kernels::RowReduce(StreamOf(lane, "RowReduce"), op, x, rows, cols, out);
}

void CudaContext::Softmax(const Lane& lane, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  DeviceGuard guard(device_);
  kernels::Softmax(StreamOf(lane, "Softmax"), x, out, rows, cols);
}

void CudaContext::Transpose(const Lane& lane, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  DeviceGuard guard(device_);
  kernels::Transpose(StreamOf(lane, "Transpose"), x, out, rows, cols);
}

void CudaContext::GatherRows(const Lane& lane, CPtr table, int64_t table_rows,
                             const float* indices, int64_t n, int64_t cols, Ptr out) {
  DeviceGuard guard(device_);
  kernels::GatherRows(StreamOf(lane, "GatherRows"), table, table_rows, indices, n, cols, out);
}

void CudaContext::ScatterAddRows(const Lane& lane, CPtr src, const float* indices, int64_t n,
                                 int64_t cols, Ptr table, int64_t table_rows) {
  DeviceGuard guard(device_);
  kernels::ScatterAddRows(StreamOf(lane, "ScatterAddRows"), src, indices, n, cols, table,
                          table_rows);
}

}  // namespace cuda
}  // namespace tandem
