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

  LayerHooks hooks;
  hooks.on_forward_done = [&](Layer& layer) { Log("hook forward " + layer.Name()); };
  hooks.on_params_ready = [&](Layer& layer) { Log("hook params " + layer.Name()); };
  hooks.on_backward_done = [&](Layer& layer) { Log("hook done " + layer.Name()); };
  ForwardArgs forward;
  forward.hooks = &hooks;
  model.ForwardWith(x, forward);
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"+forward fc1", "-forward fc1", "hook forward fc1",
                                      "+forward act1", "-forward act1", "hook forward act1",
                                      "+forward fc2", "-forward fc2", "hook forward fc2"}));

  BackwardArgs args = BackwardArgs::For(device());
  args.hooks = &hooks;
  model.BackwardWith(Tensor::Zeros({2, 3}, device()), args);
  // on_params_ready runs inside the layer's Backward (where the reducer
  // starts all-reduces); on_backward_done after it.
  EXPECT_EQ(TakeEvents(),
            (std::vector<std::string>{"+backward fc2", "hook params fc2", "-backward fc2",
                                      "hook done fc2", "+backward act1", "hook params act1",
                                      "-backward act1", "hook done act1", "+backward fc1",
                                      "hook params fc1", "-backward fc1", "hook done fc1"}));

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
