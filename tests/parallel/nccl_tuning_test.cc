// Tests NcclTuningFor (parallel/nccl_handle.h, Note [NCCL tuning]): the CTA
// bounds and symmetric memory only for ranks on one node, only with an NCCL
// that has them, and never against the environment. Needs no GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "parallel/nccl_handle.h"

namespace tandem {
namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, /*overwrite=*/1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

constexpr int kNccl228 = 22800;

TEST(NcclTuningTest, OneNodeGetsBothWhereTheBuildHasThem) {
  const NcclTuning tuning = NcclTuningFor(kNccl228, /*size=*/2, /*single_node=*/true);
  EXPECT_EQ(tuning.cta_bounds, kNcclHasCtaBounds);
  EXPECT_EQ(tuning.symmetric_memory, kNcclHasSymmetricMemory);
}

TEST(NcclTuningTest, RanksOnSeveralNodesGetNeither) {
  const NcclTuning tuning = NcclTuningFor(kNccl228, /*size=*/4, /*single_node=*/false);
  EXPECT_FALSE(tuning.cta_bounds);
  EXPECT_FALSE(tuning.symmetric_memory);
}

TEST(NcclTuningTest, AnOlderNcclAtRunTimeGetsWhatItHas) {
  const NcclTuning nccl_2_26 = NcclTuningFor(22600, 2, true);
  EXPECT_EQ(nccl_2_26.cta_bounds, kNcclHasCtaBounds);
  EXPECT_FALSE(nccl_2_26.symmetric_memory);
  const NcclTuning nccl_2_16 = NcclTuningFor(21600, 2, true);
  EXPECT_FALSE(nccl_2_16.cta_bounds);
  EXPECT_FALSE(nccl_2_16.symmetric_memory);
}

TEST(NcclTuningTest, OneRankNeedsNoSymmetricMemory) {
  EXPECT_FALSE(NcclTuningFor(kNccl228, /*size=*/1, true).symmetric_memory);
}

TEST(NcclTuningTest, TheEnvironmentHasTheLastWord) {
  {
    ScopedEnv ctas("NCCL_MIN_CTAS", "4");
    EXPECT_FALSE(NcclTuningFor(kNccl228, 2, true).cta_bounds);
  }
  {
    ScopedEnv ctas("NCCL_MAX_CTAS", "8");
    EXPECT_FALSE(NcclTuningFor(kNccl228, 2, true).cta_bounds);
  }
  {
    ScopedEnv symmetric("TANDEM_NCCL_SYMMETRIC", "0");
    EXPECT_FALSE(NcclTuningFor(kNccl228, 2, true).symmetric_memory);
  }
  {
    ScopedEnv symmetric("TANDEM_NCCL_SYMMETRIC", "1");
    EXPECT_EQ(NcclTuningFor(kNccl228, 2, true).symmetric_memory, kNcclHasSymmetricMemory);
  }
}

// The toolkit this project builds against has both.
TEST(NcclTuningTest, TheseHeadersHaveBoth) {
  EXPECT_TRUE(kNcclHasCtaBounds) << "NCCL " << NCCL_MAJOR << "." << NCCL_MINOR;
  EXPECT_TRUE(kNcclHasSymmetricMemory) << "NCCL " << NCCL_MAJOR << "." << NCCL_MINOR;
}

}  // namespace
}  // namespace tandem
