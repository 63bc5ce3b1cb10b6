// Dropout: in training, zeroes each element with probability p and scales the
// rest by 1 / (1 - p); in eval mode, the identity.
//
// Masks come from a counter-based hash of (seed, offset), so CPU and CUDA draw
// identical masks and a checkpoint only needs `offset()` to resume the stream.
//
//   Dropout drop("drop1", 0.2f, /*seed=*/42);
//   Tensor y = drop.Forward(x);
#ifndef TANDEM_LAYERS_DROPOUT_H_
#define TANDEM_LAYERS_DROPOUT_H_

#include <cstdint>
#include <string>

#include "layers/layer.h"
#include "layers/saved_tensor.h"

namespace tandem {

class Dropout : public Layer {
 public:
  Dropout(std::string name, float p, uint64_t seed);

  Tensor Forward(const Tensor& x) override;
  Tensor Backward(const Tensor& dy) override;
  std::string Name() const override { return name_; }
  std::string Describe() const override;

  // "<name>.offset": the position checkpoints keep and the pipeline's
  // recompute repeats from.
  std::vector<StateWord> State() override { return {{name_ + ".offset", &offset_}}; }

  // Elements drawn so far; the mask of the next Forward starts here.
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

 private:
  std::string name_;
  float p_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  SavedTensor mask_{"mask"};  // undefined in eval mode
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_DROPOUT_H_
