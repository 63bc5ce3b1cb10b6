// Tensor: a float32, N-d, contiguous array on a Device.
//
// A Tensor is a cheap shared handle: copying it shares the storage, like
// torch.Tensor. Deep copies are explicit (Clone, To). Slice() makes a view of
// rows along dimension 0 and Reshape() a view with another shape; both share
// storage and stay contiguous.
//
//   Tensor x = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});  // CPU
//   Tensor row = x.Slice(1, 2);                 // [1, 3] view of row 1
//   Tensor g = x.To(Device::Cuda(0));           // deep copy to the GPU
//   std::vector<float> back = g.ToVector();     // host copy
//
// Copies and host reads run on the main lane of the tensor's device
// (core/lane.h): work on other lanes must be ordered before them
// (ops::WaitFor).
#ifndef TANDEM_CORE_TENSOR_H_
#define TANDEM_CORE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/lane.h"

namespace tandem {

class Backend;
using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
// "[64, 784]"
std::string ShapeToString(const Shape& shape);

// Owns one allocation from a device's allocator, and a share of the
// device's context, which therefore outlives every storage made from it.
class Storage {
 public:
  Storage(Device device, int64_t num_elements);
  // Memory allocated elsewhere; `release` frees it when the storage dies.
  Storage(Device device, int64_t num_elements, float* data,
          std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  float* data() const { return data_; }
  int64_t num_elements() const { return num_elements_; }
  Device device() const { return device_; }
  Backend& backend() const { return *context_; }

 private:
  Device device_;
  int64_t num_elements_;
  std::shared_ptr<Backend> context_;
  float* data_;
  std::function<void()> release_;  // set for wrapped memory instead
};

class Tensor {
 public:
  // An undefined tensor (no storage); defined() is false.
  Tensor() = default;

  // Uninitialised contents.
  static Tensor Empty(const Shape& shape, Device device = Device::Cpu());
  static Tensor Zeros(const Shape& shape, Device device = Device::Cpu());
  static Tensor Full(const Shape& shape, float value,
                     Device device = Device::Cpu());
  // Copies `values` (which must hold NumElements(shape) floats) to `device`.
  static Tensor FromVector(const std::vector<float>& values, const Shape& shape,
                           Device device = Device::Cpu());
  // A tensor over memory allocated elsewhere (NumElements(shape) floats on
  // `device`), such as memory a communicator registered; `release` runs
  // when the last tensor sharing it is gone.
  static Tensor Wrap(float* data, const Shape& shape, Device device,
                     std::function<void()> release);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // dim(-1) is the last dimension.
  int64_t dim(int i) const;
  int64_t numel() const { return NumElements(shape_); }
  Device device() const;
  Backend& backend() const;

  // Pointer to the first element, in the device's memory.
  float* data() const;

  // Rows [begin, end) along dimension 0, sharing storage.
  Tensor Slice(int64_t begin, int64_t end) const;
  // The same elements with another shape, sharing storage.
  Tensor Reshape(const Shape& shape) const;
  // The whole tensor as one dimension, sharing storage.
  Tensor Flatten() const { return Reshape({numel()}); }

  // A deep copy on the same device.
  Tensor Clone() const;
  // A deep copy on `device` (a shared handle if already there).
  Tensor To(Device device) const;
  // Copies src's elements into this tensor (same numel; any devices), on
  // the main lane of this tensor's device (of src's when this is on the CPU).
  void CopyFrom(const Tensor& src);
  // The same on `lane`, a lane of this tensor's device (src's when this is
  // on the CPU).
  void CopyFrom(const Tensor& src, const Lane& lane);
  // A host copy of the elements (waits for the device).
  std::vector<float> ToVector() const;
  // The single element of a one-element tensor (waits for the device).
  float Item() const;
  // True when both handles view the same elements of the same storage.
  bool SharesStorageWith(const Tensor& other) const {
    return storage_ == other.storage_;
  }

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
};

}  // namespace tandem

#endif  // TANDEM_CORE_TENSOR_H_
