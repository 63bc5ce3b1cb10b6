#include "parallel/sharding.h"

#include <algorithm>

#include "core/check.h"

namespace tandem {

ShardRange Shard(int64_t batch, int rank, int world_size) {
  TANDEM_CHECK(world_size >= 1 && rank >= 0 && rank < world_size)
      << "rank " << rank << " outside a world of " << world_size;
  TANDEM_CHECK(batch >= 0) << "negative batch size " << batch;
  const int64_t base = batch / world_size;
  const int64_t extra = batch % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<int64_t> ShardIndices(const std::vector<int64_t>& batch, int rank,
                                  int world_size) {
  const ShardRange r = Shard(static_cast<int64_t>(batch.size()), rank, world_size);
  return std::vector<int64_t>(batch.begin() + r.begin, batch.begin() + r.end);
}

ShardRange MicroShardBlock(int64_t batch, int micro_shards, int rank, int world_size) {
  TANDEM_CHECK(world_size >= 1 && micro_shards >= 1 && micro_shards % world_size == 0)
      << world_size << " workers cannot share " << micro_shards
      << " micro-shards evenly: the world size must divide the micro-shard count";
  TANDEM_CHECK(rank >= 0 && rank < world_size)
      << "rank " << rank << " outside a world of " << world_size;
  const int per_rank = micro_shards / world_size;
  return {Shard(batch, rank * per_rank, micro_shards).begin,
          Shard(batch, (rank + 1) * per_rank - 1, micro_shards).end};
}

std::vector<ShardRange> MicroShardPieces(int64_t batch, int micro_shards, int rank,
                                         int world_size) {
  const int64_t first = MicroShardBlock(batch, micro_shards, rank, world_size).begin;
  const int per_rank = micro_shards / world_size;
  std::vector<ShardRange> pieces;
  for (int j = 0; j < per_rank; ++j) {
    const ShardRange piece = Shard(batch, rank * per_rank + j, micro_shards);
    pieces.push_back({piece.begin - first, piece.end - first});
  }
  return pieces;
}

std::vector<int64_t> MicroShardBlockIndices(const std::vector<int64_t>& batch, int micro_shards,
                                            int rank, int world_size) {
  const ShardRange r =
      MicroShardBlock(static_cast<int64_t>(batch.size()), micro_shards, rank, world_size);
  return std::vector<int64_t>(batch.begin() + r.begin, batch.begin() + r.end);
}

}  // namespace tandem
