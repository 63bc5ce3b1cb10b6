// Tensor: an N-d, contiguous array of float32 or bfloat16 on a Device.
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
// Every tensor has a dtype (core/dtype.h), float32 unless asked otherwise:
//
//   Tensor h = Tensor::Empty({batch, 4096}, device, DType::kBFloat16);
//   float* wrong = h.data();        // throws: data() is for float32 tensors
//   void* bytes = h.raw_data();     // any dtype
//   std::vector<float> v = h.ToVector();   // widened to float on the host
//
// Copies and host reads run on the main lane of the tensor's device
// (core/lane.h): work on other lanes must be ordered before them
// (ops::WaitFor). Memory is handed out again in the main lane's order; a
// tensor that work on another lane uses is marked with RecordLane, and its
// memory then waits for that lane too before it is reused:
//
//   ops::WaitFor(side, main);
//   ops::Gemm(side, dz, true, x, false, dw);
//   dz.RecordLane(side);
//   x.RecordLane(side);
//   dz = Tensor();  x = Tensor();   // safe: reused only after side's GEMM
//
// Every op that writes a tensor counts the write in its storage's version
// (version(), shared by all views of the storage), so a layer can tell that
// a tensor it kept for Backward was overwritten in place since
// (layers/saved_tensor.h):
//
//   uint64_t v = y.version();
//   ops::Add(x, y, y);          // y.version() == v + 1
//   ops::Add(x, y, z);          // reads y: y.version() unchanged
#ifndef TANDEM_CORE_TENSOR_H_
#define TANDEM_CORE_TENSOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/lane.h"

namespace tandem {

class Backend;
using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
// "[64, 784]"
std::string ShapeToString(const Shape& shape);

// Owns one allocation of `bytes` from a device's allocator, and a share of
// the device's context, which therefore outlives every storage made from it.
class Storage {
 public:
  Storage(Device device, size_t bytes);
  // Memory allocated elsewhere; `release` frees it when the storage dies.
  Storage(Device device, size_t bytes, void* data, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  Backend& backend() const { return *context_; }
  // See Note [Tensor versions] in tensor.cc.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void BumpVersion() { version_.fetch_add(1, std::memory_order_relaxed); }
  // See Tensor::RecordLane.
  void RecordLane(const Lane& lane);

 private:
  Device device_;
  size_t bytes_;
  std::shared_ptr<Backend> context_;
  char* data_;
  std::function<void()> release_;  // set for wrapped memory instead
  // Lanes other than the device's main lane that use this memory.
  std::vector<Lane> other_lanes_;
  std::atomic<uint64_t> version_{0};
};

class Tensor {
 public:
  // An undefined tensor (no storage); defined() is false.
  Tensor() = default;

  // Uninitialised contents.
  static Tensor Empty(const Shape& shape, Device device = Device::Cpu(),
                      DType dtype = DType::kFloat32);
  static Tensor Zeros(const Shape& shape, Device device = Device::Cpu(),
                      DType dtype = DType::kFloat32);
  static Tensor Full(const Shape& shape, float value, Device device = Device::Cpu(),
                     DType dtype = DType::kFloat32);
  // Copies `values` (which must hold NumElements(shape) floats) to `device`,
  // rounded to `dtype`.
  static Tensor FromVector(const std::vector<float>& values, const Shape& shape,
                           Device device = Device::Cpu(),
                           DType dtype = DType::kFloat32);
  // A tensor over memory allocated elsewhere (NumElements(shape) elements of
  // `dtype` on `device`), such as memory a communicator registered;
  // `release` runs when the last tensor sharing it is gone.
  static Tensor Wrap(void* data, const Shape& shape, Device device,
                     std::function<void()> release, DType dtype = DType::kFloat32);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // dim(-1) is the last dimension.
  int64_t dim(int i) const;
  int64_t numel() const { return NumElements(shape_); }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }
  Device device() const;
  Backend& backend() const;

  // Pointer to the first element, in the device's memory: float32 tensors
  // only (throws for another dtype, naming it).
  float* data() const;
  // Pointer to the first element, whatever the dtype.
  void* raw_data() const;
  // The operand as backends take it (core/dtype.h).
  Ptr ptr() const { return Ptr{raw_data(), dtype_}; }
  // ptr() and data() for an op that writes the elements: they count the
  // write in version(). Every op in core/ops.h writes its outputs through
  // them; a write through ptr(), data() or raw_data() is not counted.
  Ptr mutable_ptr() const {
    const Ptr p = ptr();
    storage_->BumpVersion();
    return p;
  }
  float* mutable_data() const {
    float* p = data();
    storage_->BumpVersion();
    return p;
  }
  // How many counted writes the storage under this tensor has had (through
  // this tensor or any view sharing its storage); 0 when undefined. See
  // Note [Tensor versions] in tensor.cc.
  uint64_t version() const { return storage_ != nullptr ? storage_->version() : 0; }
  // Marks that work queued on `lane` (a lane of this tensor's device) uses
  // this tensor's storage. When the storage's last handle goes, its memory
  // is handed out again only after the work queued on `lane` by then has run
  // (Note [Stream-ordered reuse] in core/cuda/caching_allocator.h; as
  // PyTorch's recordStream). Needed for every lane but the device's main
  // lane, where it does nothing; call it from the thread that queues the
  // work, and keep `lane` alive as long as the storage. No-op for an
  // undefined tensor.
  void RecordLane(const Lane& lane) const;

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
  // Copies src's elements into this tensor (same numel and dtype; any
  // devices; ops::Cast converts between dtypes), on
  // the main lane of this tensor's device (of src's when this is on the CPU).
  void CopyFrom(const Tensor& src);
  // The same on `lane`, a lane of this tensor's device (src's when this is
  // on the CPU).
  void CopyFrom(const Tensor& src, const Lane& lane);
  // A host copy of the elements, widened to float (waits for the device).
  std::vector<float> ToVector() const;
  // The single element of a one-element tensor, as a float (waits for the
  // device).
  float Item() const;
  // True when both handles view the same elements of the same storage.
  bool SharesStorageWith(const Tensor& other) const {
    return storage_ == other.storage_;
  }

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace tandem

#endif  // TANDEM_CORE_TENSOR_H_
