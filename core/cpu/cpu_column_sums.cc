#include "core/cpu/cpu_column_sums.h"

#include <Eigen/Core>
#include <algorithm>

#include "core/cpu/activation_rows.h"
#include "core/cpu/bf16_convert.h"

namespace tandem {
namespace cpu {
namespace {

// Columns per tile: one thread's share, and the width of its row buffers.
constexpr int64_t kColumnTile = 128;

// The columns [begin, end) that Eigen sums as whole packets (Note [Column
// sum order]): from the output's first aligned element, whole packets.
struct PacketColumns {
  int64_t begin = 0, end = 0;
};

PacketColumns EigenPacketColumns(const float* out, int64_t cols) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  // A packet type is a vector type (__m256), whose attributes a template
  // argument drops; only its traits are read here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
  constexpr int64_t kPacket = Eigen::internal::unpacket_traits<Packet>::size;
  constexpr int kAlignment = Eigen::internal::unpacket_traits<Packet>::alignment;
#pragma GCC diagnostic pop
  if (!Eigen::internal::packet_traits<float>::Vectorizable || kPacket == 1) return {};
  const int64_t begin = Eigen::internal::first_aligned<kAlignment>(out, cols);
  return {begin, begin + (cols - begin) / kPacket * kPacket};
}

// One thread's buffers for a tile's rows: up to four rows in use at once
// (slots 0 to 3), and two inputs of the row being made.
struct TileBuffers {
  float rows[4][kColumnTile];
  float x[kColumnTile], dy[kColumnTile];
};

// Adds rows [0, rows) of `width` columns into acc in the order of Note
// [Column sum order], packet order where `packet_order`. row(i, slot)
// returns row i's values of those columns as float32; up to four rows are
// in use at once, each in its own slot (0 to 3).
template <typename Row>
void SumRows(int64_t rows, int64_t width, bool packet_order, Row&& row, float* __restrict acc) {
  const float* first = row(0, 0);
  for (int64_t j = 0; j < width; ++j) acc[j] = first[j];
  int64_t i = 1;
  if (packet_order) {
    const int64_t fours_end = (rows - 1) & ~int64_t{3};
    for (; i < fours_end; i += 4) {
      const float* __restrict a = row(i, 0);
      const float* __restrict b = row(i + 1, 1);
      const float* __restrict c = row(i + 2, 2);
      const float* __restrict d = row(i + 3, 3);
      for (int64_t j = 0; j < width; ++j) acc[j] += (a[j] + b[j]) + (c[j] + d[j]);
    }
  }
  for (; i < rows; ++i) {
    const float* __restrict r = row(i, 0);
    for (int64_t j = 0; j < width; ++j) acc[j] += r[j];
  }
}

// Sums the columns [0, cols) in tiles, in parallel: row_of(i, begin, width,
// slot, buffers) gives row i's columns [begin, begin + width), in
// buffers.rows[slot] where it must make them. Each tile is cut where the
// packet columns start and end, so that each part has one order.
template <typename RowOf>
void SumColumns(const IntraOp& intra, int64_t rows, int64_t cols, float alpha, float beta,
                float* out, RowOf&& row_of) {
  const PacketColumns packets = EigenPacketColumns(out, cols);
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  intra.ForRanges(tiles, 1, [&](int64_t first_tile, int64_t end_tile) {
    float acc[kColumnTile];
    TileBuffers buffers;
    for (int64_t t = first_tile; t < end_tile; ++t) {
      const int64_t tile_begin = t * kColumnTile;
      const int64_t tile_end = std::min(cols, tile_begin + kColumnTile);
      const int64_t cuts[4] = {tile_begin, std::clamp(packets.begin, tile_begin, tile_end),
                               std::clamp(packets.end, tile_begin, tile_end), tile_end};
      for (int part = 0; part < 3; ++part) {
        const int64_t begin = cuts[part], width = cuts[part + 1] - cuts[part];
        if (width == 0) continue;
        SumRows(rows, width, part == 1,
                [&](int64_t i, int slot) { return row_of(i, begin, width, slot, buffers); },
                acc);
        float* o = out + begin;
        for (int64_t j = 0; j < width; ++j) {
          o[j] = (beta == 0.f ? 0.f : o[j] * beta) + alpha * acc[j];
        }
      }
    }
  });
}

// A row's stretch of an operand as float32: its memory, or for bfloat16 a
// widened copy in `buffer`.
const float* Floats(CPtr p, int64_t offset, int64_t n, float* buffer) {
  if (p.dtype == DType::kFloat32) return static_cast<const float*>(p.data) + offset;
  WidenBFloat16(static_cast<const uint16_t*>(p.data) + offset, buffer, n);
  return buffer;
}

}  // namespace

void ColumnSums(const IntraOp& intra, CPtr x, int64_t rows, int64_t cols, float alpha,
                float beta, float* out) {
  if (rows == 0) {
    for (int64_t j = 0; j < cols; ++j) out[j] = beta == 0.f ? 0.f : out[j] * beta;
    return;
  }
  SumColumns(intra, rows, cols, alpha, beta, out,
             [&](int64_t i, int64_t begin, int64_t width, int slot, TileBuffers& buffers) {
               return Floats(x, i * cols + begin, width, buffers.rows[slot]);
             });
}

void ActivationBackwardColumnSums(const IntraOp& intra, Activation activation, CPtr x, CPtr dy,
                                  Ptr dz, int64_t rows, int64_t cols, float beta, float* sums) {
  if (rows == 0) return ColumnSums(intra, CPtr{}, 0, cols, 1.f, beta, sums);
  SumColumns(intra, rows, cols, 1.f, beta, sums,
             [&](int64_t i, int64_t begin, int64_t width, int slot, TileBuffers& buffers) {
               const int64_t offset = i * cols + begin;
               const float* xs = Floats(x, offset, width, buffers.x);
               const float* g = Floats(dy, offset, width, buffers.dy);  // may be dz
               float* d = dz.dtype == DType::kFloat32 ? static_cast<float*>(dz.data) + offset
                                                      : buffers.rows[slot];
               ActivationGradRow(activation, xs, g, d, width);
               if (dz.dtype == DType::kBFloat16) {
                 // Summed as stored: rounded.
                 uint16_t* bits = static_cast<uint16_t*>(dz.data) + offset;
                 RoundToBFloat16(d, bits, width);
                 WidenBFloat16(bits, d, width);
               }
               return d;
             });
}

}  // namespace cpu
}  // namespace tandem
