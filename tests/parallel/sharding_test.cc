#include "parallel/sharding.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace tandem {
namespace {

TEST(ShardingTest, DisjointCoveringAndBalanced) {
  for (int64_t batch : {0, 1, 3, 10, 128, 1001}) {
    for (int size = 1; size <= 5; ++size) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const ShardRange s = Shard(batch, r, size);
        EXPECT_EQ(s.begin, next) << batch << "/" << size << " rank " << r;
        EXPECT_GE(s.size(), batch / size);
        EXPECT_LE(s.size(), batch / size + 1);
        next = s.end;
      }
      EXPECT_EQ(next, batch);
    }
  }
  EXPECT_EQ(ShardIndices({7, 8, 9, 10, 11}, 1, 2), (std::vector<int64_t>{10, 11}));
  EXPECT_THROW(Shard(4, 2, 2), Error);
}

// Each rank's block is exactly its pieces, the same pieces whatever the
// world size: the union of a rank's pieces over world sizes lines up.
TEST(ShardingTest, MicroShardBlocksAreWholePiecesForEveryWorldSize) {
  for (int64_t batch : {0, 3, 10, 36, 1001}) {
    for (int pieces : {1, 2, 4, 8}) {
      for (int size = 1; size <= pieces; size *= 2) {
        const int per_rank = pieces / size;
        int64_t next = 0;
        for (int r = 0; r < size; ++r) {
          const ShardRange block = MicroShardBlock(batch, pieces, r, size);
          EXPECT_EQ(block.begin, Shard(batch, r * per_rank, pieces).begin);
          EXPECT_EQ(block.end, Shard(batch, (r + 1) * per_rank - 1, pieces).end);
          EXPECT_EQ(block.begin, next) << batch << " in " << pieces << " on " << size;
          next = block.end;
        }
        EXPECT_EQ(next, batch);
      }
    }
  }
  // 10 rows in 4 pieces (3, 3, 2, 2): rank 1 of 2 takes pieces 2 and 3.
  EXPECT_EQ(MicroShardBlock(10, 4, 1, 2).begin, 6);
  EXPECT_EQ(MicroShardBlockIndices({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 1, 2),
            (std::vector<int64_t>{6, 7, 8, 9}));
  // Its pieces within the block: 3, 3 | 2, 2.
  const std::vector<ShardRange> pieces = MicroShardPieces(10, 4, 1, 2);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].begin, 0);
  EXPECT_EQ(pieces[0].end, 2);
  EXPECT_EQ(pieces[1].end, 4);
  EXPECT_THROW(MicroShardBlock(10, 4, 0, 3), Error);  // 3 does not divide 4
}

}  // namespace
}  // namespace tandem
