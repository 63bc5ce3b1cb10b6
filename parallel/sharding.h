// Splitting a global batch across workers.
//
//   ShardRange r = Shard(/*batch=*/10, /*rank=*/1, /*size=*/4);  // [3, 6)
//
// Shards are contiguous, disjoint and cover the batch; the first
// batch % size ranks get one extra example. A batch smaller than the world
// leaves some ranks empty: they still join every collective (contributing
// zero gradients), so an uneven last batch never hangs.
#ifndef TANDEM_PARALLEL_SHARDING_H_
#define TANDEM_PARALLEL_SHARDING_H_

#include <cstdint>
#include <vector>

namespace tandem {

struct ShardRange {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end - begin; }
};

ShardRange Shard(int64_t batch, int rank, int world_size);

// The indices of `rank`'s shard of a global batch of example indices.
std::vector<int64_t> ShardIndices(const std::vector<int64_t>& batch, int rank,
                                  int world_size);

// Deterministic mode (--deterministic, Note [Deterministic sums] in
// parallel/deterministic_sum.h): the global batch is cut into
// `micro_shards` pieces, piece k = Shard(batch, k, micro_shards), whatever
// the world size, and rank r takes the micro_shards / world_size pieces
// from r * micro_shards / world_size on, contiguous:
//
//   MicroShardBlock(/*batch=*/10, /*micro_shards=*/4, /*rank=*/1, /*size=*/2);  // [6, 10)
//
// world_size must divide micro_shards.
ShardRange MicroShardBlock(int64_t batch, int micro_shards, int rank, int world_size);
// Rank's pieces, each as rows [begin, end) of its block.
std::vector<ShardRange> MicroShardPieces(int64_t batch, int micro_shards, int rank,
                                         int world_size);
// Its example indices, as ShardIndices.
std::vector<int64_t> MicroShardBlockIndices(const std::vector<int64_t>& batch, int micro_shards,
                                            int rank, int world_size);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_SHARDING_H_
