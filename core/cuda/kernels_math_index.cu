// Moving rows and elements on the GPU: transpose through shared-memory
// tiles, gathering rows of a table by float32 index, and the deterministic
// scatter-add of rows into a table (Note [Deterministic scatter-add]).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernel_helpers.cuh"
#include "core/cuda/kernels_math.h"

namespace tandem {
namespace cuda {
namespace kernels {
namespace {

// Grid dimensions past this go round in grid-stride loops (65535 is the
// limit of gridDim.y and gridDim.z).
constexpr int64_t kMaxGrid = 65535;

// ---------------------------------------------------------------------------
// Transpose: a block moves a 32 x 32 tile, read along rows of x and written
// along rows of out, through shared memory (one padding column keeps the
// column reads free of bank conflicts). Elements are moved as raw bits.

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim.y; each thread moves kTile / kTileRows

template <typename Bits>
__global__ void TransposeKernel(const Bits* x, Bits* out, int64_t rows, int64_t cols) {
  __shared__ Bits tile[kTile][kTile + 1];
  const int64_t tile_rows = (rows + kTile - 1) / kTile;
  const int64_t tile_cols = (cols + kTile - 1) / kTile;
  for (int64_t tr = blockIdx.y; tr < tile_rows; tr += gridDim.y) {
    for (int64_t tc = blockIdx.x; tc < tile_cols; tc += gridDim.x) {
      const int64_t c = tc * kTile + threadIdx.x;
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t r = tr * kTile + j;
        if (r < rows && c < cols) tile[j][threadIdx.x] = x[r * cols + c];
      }
      __syncthreads();
      // out [cols, rows]: this tile's row tc * kTile + j, column tr * kTile + tx.
      const int64_t out_c = tr * kTile + threadIdx.x;
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t out_r = tc * kTile + j;
        if (out_r < cols && out_c < rows) out[out_r * rows + out_c] = tile[threadIdx.x][j];
      }
      __syncthreads();  // the tile is rewritten by the next round
    }
  }
}

// ---------------------------------------------------------------------------
// GatherRows: a block per output row (grid-stride), threads along columns.

template <typename T>
__global__ void GatherRowsKernel(const T* table, int64_t table_rows, const float* indices,
                                 int64_t n, int64_t cols, T* out) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float index = indices[i];
    const bool valid = IsIndexBelow(index, table_rows);
    const T* from = table + (valid ? static_cast<int64_t>(index) : 0) * cols;
    T* to = out + i * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      to[c] = valid ? from[c] : FromFloat<T>(NAN);
    }
  }
}

// ---------------------------------------------------------------------------
// Note [Deterministic scatter-add]
// table[indices[i], :] += src[i, :] with float atomics would add repeated
// indices in whatever order the blocks run, so the bits would change from
// run to run. Instead each table row has one owner: the block of the first
// position i whose index names it (blockIdx.x strides over positions,
// blockIdx.y over column tiles). A block first asks whether any earlier
// position holds its index (__syncthreads_or over chunks of the indices)
// and, if so, leaves the row to that position's block. The owner then loads
// the table row into float32 accumulators, one column per thread, and adds
// the src rows of every position j >= i with the same index in increasing
// j: each chunk of blockDim indices is compared at once, the matches are
// gathered as one ballot mask per warp, and every thread walks the masks'
// set bits in order. It rounds once and stores. That is the CPU backend's
// order (core/cpu/cpu_math_ops.cc), so both give the same bits. No sort and
// no scratch memory; the price is O(n^2 / blockDim) index comparisons,
// which suits the batch-sized index lists of embeddings.

constexpr int kWarps = 256 / 32;  // the most warps of a RowThreads block

// Whether a position before i holds `index`; the same answer in every
// thread of the block.
__device__ bool EarlierPositionHolds(const float* indices, int64_t i, float index) {
  bool earlier = false;
  for (int64_t j0 = 0; j0 < i && !earlier; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    earlier = __syncthreads_or(j < i && indices[j] == index) != 0;
  }
  return earlier;
}

template <typename TS, typename TT>
__global__ void ScatterAddRowsKernel(const TS* src, const float* indices, int64_t n,
                                     int64_t cols, TT* table, int64_t table_rows) {
  __shared__ unsigned matches[kWarps];
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    // Every condition that skips a position is the same in the whole block.
    const float index = indices[i];
    if (!IsIndexBelow(index, table_rows) || EarlierPositionHolds(indices, i, index)) continue;
    TT* row = table + static_cast<int64_t>(index) * cols;
    float acc = c < cols ? ToFloat(row[c]) : 0.f;
    for (int64_t j0 = i; j0 < n; j0 += blockDim.x) {
      const int64_t j = j0 + threadIdx.x;
      const unsigned mask = __ballot_sync(0xffffffffu, j < n && indices[j] == index);
      __syncthreads();  // the last chunk's masks have been read
      if (threadIdx.x % 32 == 0) matches[warp] = mask;
      __syncthreads();
      for (int w = 0; w < warps; ++w) {
        for (unsigned m = matches[w]; m != 0; m &= m - 1) {
          const int64_t k = j0 + 32 * w + (__ffs(static_cast<int>(m)) - 1);
          if (c < cols) acc += ToFloat(src[k * cols + c]);
        }
      }
    }
    if (c < cols) row[c] = FromFloat<TT>(acc);
  }
}

}  // namespace

void Transpose(cudaStream_t stream, CPtr x, Ptr out, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  CheckOneDType("Transpose", {{"x", x}, {"out", out}});
  const dim3 grid(static_cast<unsigned>(std::min((cols + kTile - 1) / kTile, kMaxGrid)),
                  static_cast<unsigned>(std::min((rows + kTile - 1) / kTile, kMaxGrid)));
  const dim3 block(kTile, kTileRows);
  if (SizeOf(x.dtype) == 4) {
    TransposeKernel<uint32_t><<<grid, block, 0, stream>>>(
        static_cast<const uint32_t*>(x.data), static_cast<uint32_t*>(out.data), rows, cols);
  } else {
    TransposeKernel<uint16_t><<<grid, block, 0, stream>>>(
        static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(out.data), rows, cols);
  }
  TANDEM_CUDA_CHECK_LAUNCH() << "Transpose [" << rows << ", " << cols << "] "
                             << DTypeName(x.dtype);
}

void GatherRows(cudaStream_t stream, CPtr table, int64_t table_rows, const float* indices,
                int64_t n, int64_t cols, Ptr out) {
  if (n <= 0 || cols <= 0) return;
  CheckOneDType("GatherRows", {{"table", table}, {"out", out}});
  const int blocks = static_cast<int>(std::min(n, kMaxGrid));
  DispatchDType(table.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    GatherRowsKernel<T><<<blocks, RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(table.data), table_rows, indices, n, cols,
        static_cast<T*>(out.data));
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "GatherRows (" << n << " rows of " << cols << " from "
                             << table_rows << ")";
}

void ScatterAddRows(cudaStream_t stream, CPtr src, const float* indices, int64_t n,
                    int64_t cols, Ptr table, int64_t table_rows) {
  if (n <= 0 || cols <= 0) return;
  const int threads = RowThreads(cols);
  const int64_t column_tiles = (cols + threads - 1) / threads;
  TANDEM_CHECK(column_tiles <= kMaxGrid)
      << "ScatterAddRows: " << cols << " columns exceed the CUDA grid limit ("
      << kMaxGrid * threads << ")";
  const dim3 grid(static_cast<unsigned>(std::min(n, kMaxGrid)),
                  static_cast<unsigned>(column_tiles));
  DispatchDType(src.dtype, [&](auto ts) {
    DispatchDType(table.dtype, [&](auto tt) {
      using TS = typename decltype(ts)::type;
      using TT = typename decltype(tt)::type;
      ScatterAddRowsKernel<TS, TT><<<grid, threads, 0, stream>>>(
          static_cast<const TS*>(src.data), indices, n, cols, static_cast<TT*>(table.data),
          table_rows);
    });
  });
  TANDEM_CUDA_CHECK_LAUNCH() << "ScatterAddRows (" << n << " rows of " << cols << " into "
                             << table_rows << ")";
}

}  // namespace kernels
}  // namespace cuda
}  // namespace tandem
