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

}  // namespace
}  // namespace tandem
