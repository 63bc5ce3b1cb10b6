#include "core/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/cpu/cpu_math_ops.h"
#include "core/cpu/lane_reduce.h"
#include "core/elementwise_math.h"
#include "core/kernel_math.h"

namespace tandem {
namespace cpu {
namespace math {

// Row r of the batch is row i = r % t of its matrix and sees columns 0..i.
void CausalSoftmax(const IntraOp& intra, const float* x, float* out, int64_t batch, int64_t t,
                   float scale) {
  intra.ForRanges(batch * t, RowsPerPiece(t), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * t;
      float* outr = out + r * t;
      const int64_t seen = r % t + 1;
      const float max = LaneMax(seen, [&](int64_t c) { return scale * xr[c]; });
      // Reads xr[c] before it may overwrite it.
      for (int64_t c = 0; c < seen; ++c) outr[c] = kernel_math::Exp(scale * xr[c] - max);
      const float sum = LaneSum(seen, [&](int64_t c) { return outr[c]; });
      for (int64_t c = 0; c < seen; ++c) outr[c] /= sum;
      std::fill(outr + seen, outr + t, 0.f);
    }
  });
}

void CausalSoftmaxBackward(const IntraOp& intra, const float* y, const float* dy, float* dx,
                           int64_t batch, int64_t t, float scale) {
  intra.ForRanges(batch * t, RowsPerPiece(t), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* yr = y + r * t;
      const float* dyr = dy + r * t;
      float* dxr = dx + r * t;
      const int64_t seen = r % t + 1;
      const float dot = LaneSum(seen, [&](int64_t c) { return dyr[c] * yr[c]; });
      for (int64_t c = 0; c < seen; ++c) dxr[c] = scale * (yr[c] * (dyr[c] - dot));
      std::fill(dxr + seen, dxr + t, 0.f);
    }
  });
}

void TransposeBatched(const IntraOp& intra, const void* x, void* out, int64_t batch, int64_t rows,
                      int64_t cols, size_t element_bytes) {
  const int64_t bytes = rows * cols * static_cast<int64_t>(element_bytes);
  const int64_t per_piece =
      std::max<int64_t>(1, kPieceElements / std::max<int64_t>(1, rows * cols));
  intra.ForRanges(batch, per_piece, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      Transpose(static_cast<const char*>(x) + b * bytes, static_cast<char*>(out) + b * bytes, rows,
                cols, element_bytes);
    }
  });
}

void Permute(const IntraOp& intra, const void* x, void* out, const PermuteSpec& spec,
             size_t element_bytes) {
  const int rank = spec.rank;
  int64_t in_stride[PermuteSpec::kMaxRank];
  int64_t out_shape[PermuteSpec::kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_stride[d] = stride;
    stride *= spec.in_shape[d];
  }
  for (int i = 0; i < rank; ++i) out_shape[i] = spec.in_shape[spec.perm[i]];
  // A last dimension that stays last moves as whole runs.
  const bool runs = spec.perm[rank - 1] == rank - 1;
  const int outer_rank = runs ? rank - 1 : rank;
  const int64_t run = runs ? out_shape[rank - 1] : 1;
  const int64_t run_bytes = run * static_cast<int64_t>(element_bytes);
  int64_t outer = 1;
  for (int i = 0; i < outer_rank; ++i) outer *= out_shape[i];
  const char* src = static_cast<const char*>(x);
  char* dst = static_cast<char*>(out);
  const int64_t per_piece = std::max<int64_t>(1, kPieceElements / std::max<int64_t>(1, run));
  intra.ForRanges(outer, per_piece, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      // o's index over out's outer dimensions, and its element in x.
      int64_t rest = o, from = 0;
      for (int i = outer_rank - 1; i >= 0; --i) {
        from += (rest % out_shape[i]) * in_stride[spec.perm[i]];
        rest /= out_shape[i];
      }
      std::memcpy(dst + o * run_bytes, src + from * static_cast<int64_t>(element_bytes),
                  static_cast<size_t>(run_bytes));
    }
  });
}

namespace {

template <typename Bits>
void MaskedFillAs(const IntraOp& intra, const Bits* x, const float* mask, int64_t n, int64_t mask_n,
                  Bits fill, Bits* out) {
  intra.ForRanges(n, kPieceElements, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = mask[i % mask_n] != 0.f ? fill : x[i];
  });
}

}  // namespace

void MaskedFill(const IntraOp& intra, const void* x, const float* mask, int64_t n, int64_t mask_n,
                uint32_t fill_bits, void* out, size_t element_bytes) {
  if (element_bytes == 4) {
    MaskedFillAs(intra, static_cast<const uint32_t*>(x), mask, n, mask_n, fill_bits,
                 static_cast<uint32_t*>(out));
  } else {
    TANDEM_CHECK(element_bytes == 2) << "MaskedFill of " << element_bytes << "-byte elements";
    MaskedFillAs(intra, static_cast<const uint16_t*>(x), mask, n, mask_n,
                 static_cast<uint16_t>(fill_bits), static_cast<uint16_t*>(out));
  }
}

void CopyRows(const IntraOp& intra, const void* src, int64_t src_pitch, void* dst,
              int64_t dst_pitch, int64_t row_bytes, int64_t rows) {
  const int64_t per_piece = std::max<int64_t>(1, 4 * kPieceElements / std::max<int64_t>(1, row_bytes));
  intra.ForRanges(rows, per_piece, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch,
                  static_cast<const char*>(src) + r * src_pitch, static_cast<size_t>(row_bytes));
    }
  });
}

}  // namespace math
}  // namespace cpu
}  // namespace tandem
