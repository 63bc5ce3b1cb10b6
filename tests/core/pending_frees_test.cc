#include "core/pending_frees.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tandem {
namespace {

// An event the test completes by hand (or makes fail, as a lost device would).
class FakeEvent : public LaneEvent {
 public:
  struct State {
    bool done = false;
    bool fails = false;
  };
  explicit FakeEvent(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool Query() const override {
    if (state_->fails) throw std::runtime_error("device lost");
    return state_->done;
  }
  void Synchronize() const override {}
  double ElapsedMsSince(const LaneEvent&) const override { return 0.0; }

 private:
  std::shared_ptr<State> state_;
};

std::vector<std::unique_ptr<LaneEvent>> Events(
    const std::vector<std::shared_ptr<FakeEvent::State>>& states) {
  std::vector<std::unique_ptr<LaneEvent>> events;
  for (const auto& s : states) events.push_back(std::make_unique<FakeEvent>(s));
  return events;
}

struct Released {
  void* ptr;
  size_t size;
};

std::vector<Released> Collect(PendingFrees& pending, bool all = false) {
  std::vector<Released> out;
  pending.Collect(all, [&](void* p, size_t size) { out.push_back({p, size}); });
  return out;
}

char blocks[4];

// The fault this guards against: a block its lanes still use, collected
// twice, came out of the second collection (its events were lost when it was
// kept in place), and the allocator handed it to a new tensor.
TEST(PendingFreesTest, ABlockStaysUntilItsEventsCompleteHoweverOftenCollected) {
  PendingFrees pending;
  auto running = std::make_shared<FakeEvent::State>();
  pending.Add(&blocks[0], 512, Events({running}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(Collect(pending).empty()) << "collection " << i;
    EXPECT_EQ(pending.size(), 1u);
  }
  running->done = true;
  const std::vector<Released> out = Collect(pending);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ptr, &blocks[0]);
  EXPECT_EQ(out[0].size, 512u);
  EXPECT_TRUE(pending.empty());
  EXPECT_TRUE(Collect(pending).empty());
}

TEST(PendingFreesTest, BlocksComeOutOnceEachAsTheirEventsComplete) {
  PendingFrees pending;
  auto a = std::make_shared<FakeEvent::State>();
  auto b = std::make_shared<FakeEvent::State>();
  auto c = std::make_shared<FakeEvent::State>();
  pending.Add(&blocks[0], 512, Events({a}));
  pending.Add(&blocks[1], 1024, Events({b}));
  pending.Add(&blocks[2], 512, Events({a, c}));  // two lanes: both must finish
  pending.Add(&blocks[3], 2048, {});              // nothing to wait for
  b->done = true;
  std::vector<Released> out = Collect(pending);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ptr, &blocks[1]);
  EXPECT_EQ(out[1].ptr, &blocks[3]);
  a->done = true;  // block 0 is free; block 2 still waits for c
  for (int i = 0; i < 3; ++i) {
    out = Collect(pending);
    ASSERT_EQ(out.size(), i == 0 ? 1u : 0u) << "collection " << i;
    if (i == 0) EXPECT_EQ(out[0].ptr, &blocks[0]);
  }
  c->done = true;
  out = Collect(pending);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ptr, &blocks[2]);
  EXPECT_EQ(out[0].size, 512u);
  EXPECT_TRUE(pending.empty());
}

TEST(PendingFreesTest, AllReleasesEveryBlockAndAFailedQueryKeepsOne) {
  PendingFrees pending;
  auto lost = std::make_shared<FakeEvent::State>();
  lost->fails = true;
  auto running = std::make_shared<FakeEvent::State>();
  pending.Add(&blocks[0], 512, Events({lost}));
  pending.Add(&blocks[1], 512, Events({running}));
  EXPECT_TRUE(Collect(pending).empty());
  EXPECT_TRUE(Collect(pending).empty());
  EXPECT_EQ(pending.size(), 2u);
  EXPECT_EQ(Collect(pending, /*all=*/true).size(), 2u);
  EXPECT_TRUE(pending.empty());
}

}  // namespace
}  // namespace tandem
