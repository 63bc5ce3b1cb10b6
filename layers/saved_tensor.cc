#include "layers/saved_tensor.h"

#include "core/check.h"

namespace tandem {

const Tensor& SavedTensor::Get(const Layer& owner) const {
  TANDEM_CHECK(tensor_.defined())
      << "layer " << owner.Describe() << ": Backward without a Forward before it (its "
      << what_ << " is not saved; each Forward allows one Backward)";
  const uint64_t now = tensor_.version();
  TANDEM_CHECK(now == version_)
      << "layer " << owner.Describe() << ": " << owner.Name() << "'s saved " << what_ << " "
      << ShapeToString(tensor_.shape()) << " was modified in place after Forward (version "
      << now << ", saved at " << version_
      << "): an in-place op overwrote a tensor this layer needs for Backward; write into a "
         "new tensor instead";
  return tensor_;
}

}  // namespace tandem
