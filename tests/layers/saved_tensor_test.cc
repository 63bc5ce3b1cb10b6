// In-place writes into what a layer kept for Backward (layers/saved_tensor.h):
// ops count their writes, a write after Forward makes Backward throw an
// error that names the layer and the tensor, and the Residual layer, which
// writes a new tensor, gives correct gradients where the naive in-place
// residual (ops::Add(x, fx, fx)) over a ReLU Linear silently did not.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/gradient_check.h"
#include "layers/linear.h"
#include "layers/residual.h"
#include "layers/saved_tensor.h"
#include "tests/support/device_test.h"
#include "tests/support/error_text.h"

namespace tandem {
namespace {

using testing::DeviceTest;
using testing::ErrorText;

class AliasingTest : public DeviceTest {
 protected:
  Tensor RandomInput(int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> v(rows * cols);
    for (float& x : v) x = rng.Normal();
    return Tensor::FromVector(v, {rows, cols}, device());
  }
  std::unique_ptr<Linear> MakeLinear(const std::string& name, int64_t n, Activation act) {
    Rng rng(1);
    LinearOptions o;
    o.activation = act;
    o.device = device();
    return std::make_unique<Linear>(name, n, n, rng, o);
  }
};

// Ops bump the version of what they write, and only that.
TEST_P(AliasingTest, OpsCountWritesOfTheirOutputsOnly) {
  Tensor a = RandomInput(2, 3, 1), b = RandomInput(2, 3, 2);
  Tensor out = Tensor::Empty({2, 3}, device());
  ops::Add(a, b, out);
  EXPECT_EQ(a.version(), 0u);
  EXPECT_EQ(b.version(), 0u);
  EXPECT_EQ(out.version(), 1u);
  ops::Add(a, b, b);  // in place
  EXPECT_EQ(a.version(), 0u);
  EXPECT_EQ(b.version(), 1u);
  Tensor w = RandomInput(4, 3, 3);
  Tensor y = Tensor::Empty({2, 4}, device());
  ops::Gemm(a, false, w, true, y);
  ops::ActivationForward(Activation::kRelu, y, y);
  Tensor row = out.Slice(0, 1);
  ops::Fill(row, 0.f);  // a view's write is its storage's
  EXPECT_EQ(w.version(), 0u);
  EXPECT_EQ(y.version(), 2u);
  EXPECT_EQ(out.version(), 2u);
}

// The case: y = x + fc(x) written into fc's output, which a ReLU
// Linear keeps for its Backward. Backward refuses, naming what happened.
TEST_P(AliasingTest, NaiveInPlaceResidualFailsInBackward) {
  auto fc = MakeLinear("fc1", 4, Activation::kRelu);
  const Tensor x = RandomInput(3, 4, 5);
  Tensor fx = fc->Forward(x);
  ops::Add(x, fx, fx);  // the allocation-free residual
  const std::string text = ErrorText([&] { fc->Backward(RandomInput(3, 4, 6)); });
  EXPECT_NE(text.find("layer fc1 (Linear 4→4, relu): fc1's saved output [3, 4] was modified "
                      "in place after Forward (version 2, saved at 1): an in-place op "
                      "overwrote a tensor this layer needs for Backward; write into a new "
                      "tensor instead"),
            std::string::npos)
      << text;
}

// The same for a saved input, in Linear (any activation) and in the
// activation layers; a read of a saved tensor, or a write after Backward,
// is fine.
TEST_P(AliasingTest, InPlaceWriteOfASavedInputFailsInBackward) {
  auto fc = MakeLinear("fc", 4, Activation::kIdentity);
  Tensor x = RandomInput(3, 4, 7);
  Tensor y = fc->Forward(x);
  ops::Scale(x, 2.f);
  EXPECT_NE(ErrorText([&] { fc->Backward(y); }).find("fc's saved input [3, 4] was modified"),
            std::string::npos);

  auto act = MakeTanh("act");
  Tensor h = RandomInput(3, 4, 8);
  Tensor z = act->Forward(h);
  Tensor flat = h.Reshape({12});
  ops::Fill(flat, 0.f);  // through a view
  EXPECT_NE(ErrorText([&] { act->Backward(z); }).find("act's saved input [3, 4] was modified"),
            std::string::npos);

  Tensor fine = RandomInput(3, 4, 9);
  Tensor out = fc->Forward(fine);
  Tensor sum = Tensor::Empty(out.shape(), device());
  ops::Add(fine, out, sum);  // reads only
  EXPECT_TRUE(fc->Backward(out).defined());
  ops::Add(fine, out, out);  // after Backward: nothing needs it now
}

// A layer's own writes in Forward are not in-place writes after it: GELU
// Linear adds its bias into its pre-activation, Dropout writes its mask.
TEST_P(AliasingTest, ForwardsOwnWritesDoNotCount) {
  auto fc = MakeLinear("fc", 4, Activation::kGelu);
  const Tensor x = RandomInput(3, 4, 10);
  fc->Forward(x);
  EXPECT_TRUE(fc->Backward(x).defined());
  Dropout drop("drop", 0.5f, 3);
  drop.Forward(x);
  EXPECT_TRUE(drop.Backward(x).defined());
}

// The Residual layer over the ReLU Linear: finite-difference
// gradients agree, and the weight gradient is the inner layer's for dy
// (y = x + fc(x) gives dL/dW = fc's dL/dW with the same dy).
TEST_P(AliasingTest, ResidualLayerGivesCorrectGradients) {
  for (Activation act : {Activation::kRelu, Activation::kIdentity}) {
    Residual block("block", MakeLinear("fc", 6, act));
    EXPECT_LT(CheckLayerGradients(block, RandomInput(5, 6, 11)), 1e-2)
        << ActivationName(act);

    auto alone = MakeLinear("fc", 6, act);
    Residual wrapped("block", MakeLinear("fc", 6, act));
    const Tensor x = RandomInput(5, 6, 12);
    const Tensor dy = RandomInput(5, 6, 13);
    alone->Forward(x);
    const std::vector<float> dfx = alone->Backward(dy).ToVector();
    wrapped.Forward(x);
    const std::vector<float> dx = wrapped.Backward(dy).ToVector();
    EXPECT_EQ(wrapped.Parameters()[0].grad().ToVector(),
              alone->Parameters()[0].grad().ToVector());
    const std::vector<float> dys = dy.ToVector();
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_FLOAT_EQ(dx[i], dys[i] + dfx[i]);
  }
}

INSTANTIATE_DEVICE_TEST_SUITE_P(AliasingTest);

// SavedTensor on its own: Get checks, tensor() does not, Reset and Release
// let go.
TEST(SavedTensorTest, GetChecksTheVersion) {
  auto owner = MakeRelu("owner");
  SavedTensor saved("output");
  EXPECT_NE(ErrorText([&] { saved.Get(*owner); }).find("Backward without a Forward"),
            std::string::npos);
  Tensor t = Tensor::Zeros({2});
  saved.Save(t);
  EXPECT_TRUE(saved.Get(*owner).SharesStorageWith(t));
  ops::Fill(t, 1.f);
  EXPECT_THROW(saved.Get(*owner), Error);
  EXPECT_TRUE(saved.tensor().SharesStorageWith(t));
  saved.Save(t);  // saved again after the write: fine
  EXPECT_NO_THROW(saved.Get(*owner));
  Tensor out = saved.Release();
  EXPECT_TRUE(out.SharesStorageWith(t));
  EXPECT_FALSE(saved.defined());
}

}  // namespace
}  // namespace tandem
