// SavedTensor: a tensor a layer keeps from Forward for Backward, guarded
// against in-place writes.
//
// A layer that keeps a tensor it does not own (its input, or the output it
// hands to the caller) cannot stop the caller from writing into that tensor
// before Backward; Backward would then compute with the new values and give
// wrong gradients without a sign. A SavedTensor records the tensor's
// version when saved (core/tensor.h counts every op's writes) and Get()
// compares it, throwing an error that names the layer:
//
//   Tensor Scale::Forward(const Tensor& x) {
//     Tensor y = Tensor::Empty(x.shape(), x.device(), x.dtype());
//     ops::Mul(x, w_, y);
//     input_.Save(x);                      // after the layer's own writes
//     return y;
//   }
//   Tensor Scale::Backward(const Tensor& dy) {
//     const Tensor& x = input_.Get(*this);  // throws if x was written since
//     ...
//   }
//   SavedTensor input_{"input"};
//
// Save a tensor after the layer's own writes to it in Forward: the version
// recorded is the one Backward expects to find.
#ifndef TANDEM_LAYERS_SAVED_TENSOR_H_
#define TANDEM_LAYERS_SAVED_TENSOR_H_

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "layers/layer.h"

namespace tandem {

class SavedTensor {
 public:
  // `what` names the tensor in errors: "input", "output", "mask".
  explicit SavedTensor(std::string what) : what_(std::move(what)) {}

  // Keeps `t` (a shared handle, no copy) and its version now.
  void Save(const Tensor& t) {
    tensor_ = t;
    version_ = t.version();
  }
  // The saved tensor. Throws tandem::Error naming `owner` and the tensor
  // when an op wrote into its storage (through it or any view) after Save.
  const Tensor& Get(const Layer& owner) const;
  // The saved tensor without the check: for its shape, or after Get in the
  // same Backward.
  const Tensor& tensor() const { return tensor_; }
  bool defined() const { return tensor_.defined(); }
  // Lets the tensor go (its memory may return to the allocator).
  void Reset() { tensor_ = Tensor(); }
  // Moves the tensor out, leaving this empty.
  Tensor Release() { return std::move(tensor_); }

 private:
  std::string what_;
  Tensor tensor_;
  uint64_t version_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_SAVED_TENSOR_H_
