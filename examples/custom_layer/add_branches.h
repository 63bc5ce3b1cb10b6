// A user-defined container, written only against Tandem's public API: two
// branches that see the same input, joined by an add,
//
//   y = a(x) + b(x),    dx = a'(x)^T dy + b'(x)^T dy.
//
// It lists its branches in Children() and does nothing else for the
// runtime: its parameters ("<name>.<branch's names>") and its state words (a
// Dropout's position in either branch) come from the layer tree, so
// SetTraining, checkpoints, the reducer and the pipeline reach both
// branches. docs/custom_layers.md ("Writing a container") walks through it.
#ifndef TANDEM_EXAMPLES_CUSTOM_LAYER_ADD_BRANCHES_H_
#define TANDEM_EXAMPLES_CUSTOM_LAYER_ADD_BRANCHES_H_

#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "layers/layer.h"

namespace example {

using tandem::Tensor;

class AddBranches : public tandem::Layer {
 public:
  AddBranches(std::string name, std::unique_ptr<tandem::Layer> a, std::unique_ptr<tandem::Layer> b)
      : name_(std::move(name)), a_(std::move(a)), b_(std::move(b)) {
    TANDEM_CHECK(a_ != nullptr && b_ != nullptr) << "layer '" << name_ << "': a null branch";
  }

  Tensor Forward(const Tensor& x) override {
    const Tensor ya = a_->Forward(x);
    const Tensor yb = b_->Forward(x);
    TANDEM_CHECK(ya.shape() == yb.shape())
        << "layer '" << name_ << "': branch " << a_->Name() << " gives "
        << tandem::ShapeToString(ya.shape()) << " but " << b_->Name() << " gives "
        << tandem::ShapeToString(yb.shape());
    // A new tensor: either branch may have kept its output for Backward.
    Tensor y = Tensor::Empty(ya.shape(), ya.device(), ya.dtype());
    tandem::ops::Add(ya, tandem::ops::ToDType(yb, ya.dtype()), y);
    return y;
  }

  Tensor Backward(const Tensor& dy) override {
    const Tensor da = a_->Backward(dy);
    const Tensor db = b_->Backward(dy);
    Tensor dx = Tensor::Empty(da.shape(), da.device(), da.dtype());
    tandem::ops::Add(da, tandem::ops::ToDType(db, da.dtype()), dx);
    return dx;
  }

  std::vector<tandem::Layer*> Children() override { return {a_.get(), b_.get()}; }
  std::string Name() const override { return name_; }
  std::string Describe() const override {
    return name_ + " (AddBranches: " + a_->Describe() + " + " + b_->Describe() + ")";
  }

 private:
  std::string name_;
  std::unique_ptr<tandem::Layer> a_, b_;
};

}  // namespace example

#endif  // TANDEM_EXAMPLES_CUSTOM_LAYER_ADD_BRANCHES_H_
