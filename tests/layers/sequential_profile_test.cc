// The profiler ranges a training step of a Sequential model emits (seen
// through core/profile_range.h's test listener): each layer's forward in
// order, each layer's backward in reverse, hooks outside the layer's range,
// and the optimizer's step around its update.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/profile_range.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "tests/support/device_test.h"

namespace tandem {
namespace {

using testing::DeviceTest;

// "+name" when a range begins, "-name" when it ends; hooks log "hook ...".
class SequentialProfileTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped()) return;
    SetProfileRangeListenerForTesting([this](const char* name, bool push) {
      Log((push ? "+" : "-") + std::string(name));
    });
  }
  void TearDown() override { SetProfileRangeListenerForTesting(nullptr); }

  void Log(std::string event) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> TakeEvents() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(events_);
  }

  std::mutex mutex_;
  std::vector<std::string> events_;
};

TEST_P(SequentialProfileTest, LayersForwardInOrderAndBackwardInReverse) {
  Rng rng(0);
  LinearOptions o;
  o.device = device();
  Sequential model("net");
  model.Emplace<Linear>("fc1", 5, 4, rng, o);
  model.Add(MakeTanh("act1"));
  model.Emplace<Linear>("fc2", 4, 3, rng, o);
  Tensor x = Tensor::Zeros({2, 5}, device());

  model.Forward(x, [&](size_t i) { Log("hook forward " + std::to_string(i)); });
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"+forward fc1", "-forward fc1", "hook forward 0",
                                      "+forward act1", "-forward act1", "hook forward 1",
                                      "+forward fc2", "-forward fc2", "hook forward 2"}));

  Sequential::LayerHooks hooks;
  hooks.on_params_ready = [&](size_t i) { Log("hook params " + std::to_string(i)); };
  hooks.on_layer_done = [&](size_t i) { Log("hook done " + std::to_string(i)); };
  model.BackwardWith(Tensor::Zeros({2, 3}, device()), BackwardArgs::For(device()), hooks);
  // on_params_ready runs inside the layer's Backward (where the reducer
  // starts all-reduces); on_layer_done after it.
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"+backward fc2", "hook params 2", "-backward fc2",
                                      "hook done 2", "+backward act1", "hook params 1",
                                      "-backward act1", "hook done 1", "+backward fc1",
                                      "hook params 0", "-backward fc1", "hook done 0"}));

  AdamW adamw(model.Parameters(), AdamWParams{});
  adamw.Step();
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"+optimizer step", "+AdamW update",
                                                    "-AdamW update", "-optimizer step"}));
  Sgd sgd(model.Parameters(), SgdParams{});
  sgd.UpdateParameters({0, 1}, MainLane(device()));
  EXPECT_EQ(TakeEvents(), (std::vector<std::string>{"+SGD update", "-SGD update"}));
}

INSTANTIATE_DEVICE_TEST_SUITE_P(SequentialProfileTest);

}  // namespace
}  // namespace tandem
