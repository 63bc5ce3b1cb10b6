// The CPU backend's loops for the attention ops of core/ops_attention.h
// other than the products (cpu_batched_gemm.h): the causal softmax and its
// gradient on float32 arrays (cpu_backend.cc widens bfloat16 operands first
// and rounds results back once), and the batched transpose, which copies
// elements bit for bit in their own dtype. Rows (or matrices) spread over
// `intra`'s threads in pieces fixed by the shape, each row computed as on
// one thread (its sums in lanes, Note [Sums in lanes] in lane_reduce.h; its
// exponentials by kernel_math::Exp, which vectorises): the same bits on any
// number of threads.
//
//   cpu::math::CausalSoftmax(intra, x, out, batch, t, 0.125f);
#ifndef TANDEM_CORE_CPU_CPU_ATTENTION_H_
#define TANDEM_CORE_CPU_CPU_ATTENTION_H_

#include <cstddef>
#include <cstdint>

#include "core/backend.h"
#include "core/cpu/cpu_thread_pool.h"

namespace tandem {
namespace cpu {
namespace math {

// dispatch::CausalSoftmax: `batch` matrices [t, t]; out may be x.
void CausalSoftmax(const IntraOp& intra, const float* x, float* out, int64_t batch, int64_t t,
                   float scale);
// dispatch::CausalSoftmaxBackward; dx may be y or dy.
void CausalSoftmaxBackward(const IntraOp& intra, const float* y, const float* dy, float* dx,
                           int64_t batch, int64_t t, float scale);
// out[b] [cols, rows] = x[b] [rows, cols]^T; elements of `element_bytes`
// (2 or 4) bytes.
void TransposeBatched(const IntraOp& intra, const void* x, void* out, int64_t batch, int64_t rows,
                      int64_t cols, size_t element_bytes);
// dispatch::Permute on elements of `element_bytes` bytes: where the last
// dimension stays last, its rows move with one memcpy each.
void Permute(const IntraOp& intra, const void* x, void* out, const PermuteSpec& spec,
             size_t element_bytes);
// dispatch::MaskedFill on x's bits: `fill_bits` are the fill value's bits in
// x's dtype (element_bytes 4 or 2).
// Backend::CopyRows, the rows spread over `intra`'s threads.
void CopyRows(const IntraOp& intra, const void* src, int64_t src_pitch, void* dst,
              int64_t dst_pitch, int64_t row_bytes, int64_t rows);
void MaskedFill(const IntraOp& intra, const void* x, const float* mask, int64_t n, int64_t mask_n,
                uint32_t fill_bits, void* out, size_t element_bytes);

}  // namespace math
}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_CORE_CPU_CPU_ATTENTION_H_
