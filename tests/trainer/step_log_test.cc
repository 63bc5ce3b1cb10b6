// StepLog (trainer/step_log.h) over two worker threads, with
// closed forms: the row's loss is the sum of the ranks' losses, its gradient
// norm the L2 norm of every gradient together, rows come every N-th step,
// and samples per second count the examples since the previous row.
#include "trainer/step_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "core/check.h"
#include "parallel/thread_communicator.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;
class StepLogTest : public DeviceTest {};

TEST_P(StepLogTest, RowsEveryNthStepWithSummedLossAndGradientNorm) {
  constexpr int kRanks = 2;
  ThreadGroup group(kRanks);
  std::vector<std::vector<StepRow>> rows(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      // Reduced gradients are the same on every rank: |w|^2 = 9 + 16 and
      // |b|^2 = 144, so the norm is 13. A parameter without a gradient
      // adds nothing.
      Parameter w(Tensor::Zeros({2}, device()), Tensor::FromVector({3, -4}, {2}, device()));
      Parameter b(Tensor::Zeros({1}, device()), Tensor::FromVector({12}, {1}, device()));
      Parameter unused(Tensor::Zeros({3}, device()));
      unused.grad() = Tensor();  // no gradient: left out of the norm
      StepLog log(/*every=*/2, group.communicator(rank), {{"w", &w}, {"b", &b}, {"u", &unused}},
                  device());
      log.StartInterval();
      // This rank's share of the global batch's mean loss.
      Tensor loss = Tensor::Full({1}, 0.25f * (rank + 1), device());
      for (int64_t step = 1; step <= 4; ++step) {
        std::optional<StepRow> row = log.After(step, /*epoch=*/0, 64, loss, 0.5);
        EXPECT_EQ(row.has_value(), step % 2 == 0) << "step " << step;
        if (row) rows[rank].push_back(*row);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(rows[rank].size(), 2u) << "rank " << rank;
    for (size_t i = 0; i < 2; ++i) {
      const StepRow& row = rows[rank][i];
      EXPECT_EQ(row.step, static_cast<int64_t>(2 * (i + 1)));
      EXPECT_EQ(row.epoch, 1);
      EXPECT_DOUBLE_EQ(row.loss, 0.25 + 0.5);
      EXPECT_DOUBLE_EQ(row.lr, 0.5);
      EXPECT_DOUBLE_EQ(row.grad_norm, 13.0);
      EXPECT_GT(row.samples_per_second, 0.0);
      EXPECT_TRUE(std::isfinite(row.samples_per_second));
    }
  }
}

// The interval restarts at each row and at StartInterval: a slow interval
// of 2 x 64 examples reads as about 128 per its duration.
TEST_P(StepLogTest, SamplesPerSecondCountTheExamplesSinceTheLastRow) {
  ThreadGroup group(1);
  Parameter w(Tensor::Zeros({1}, device()));
  StepLog log(2, group.communicator(0), {{"w", &w}}, device());
  Tensor loss = Tensor::Zeros({1}, device());
  log.StartInterval();
  EXPECT_FALSE(log.After(1, 0, 64, loss, 1.0).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::optional<StepRow> row = log.After(2, 0, 64, loss, 1.0);
  ASSERT_TRUE(row.has_value());
  EXPECT_GT(row->samples_per_second, 128 / 10.0);  // generous: a loaded machine
  EXPECT_LT(row->samples_per_second, 128 / 0.2);
  EXPECT_DOUBLE_EQ(row->grad_norm, 0.0);
}

TEST(StepLogUsageTest, EveryMustBePositive) {
  ThreadGroup group(1);
  EXPECT_THROW(StepLog(0, group.communicator(0), {}, Device::Cpu()), Error);
}

INSTANTIATE_DEVICE_TEST_SUITE_P(StepLogTest);

}  // namespace
}  // namespace tandem
