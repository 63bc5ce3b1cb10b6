#include "core/tensor.h"

#include <cstdint>
#include <cstdio>
#include <sstream>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"
#include "core/dispatch.h"

namespace tandem {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out << (i ? ", " : "") << shape[i];
  }
  out << "]";
  return out.str();
}

namespace {
// Dimensions are non-negative and their product, in bytes, fits a size_t:
// NumElements then cannot overflow (signed overflow would be undefined).
void CheckShape(const Shape& shape) {
  constexpr uint64_t kMaxElements = SIZE_MAX / sizeof(float);
  uint64_t elements = 1;
  for (int64_t d : shape) {
    TANDEM_CHECK(d >= 0) << "negative dimension in shape " << ShapeToString(shape);
    if (d == 0) return;  // an empty tensor, whatever the other dimensions
  }
  for (int64_t d : shape) {
    TANDEM_CHECK(static_cast<uint64_t>(d) <= kMaxElements / elements)
        << "shape " << ShapeToString(shape) << " has too many elements";
    elements *= static_cast<uint64_t>(d);
  }
}
}  // namespace

Storage::Storage(Device device, size_t bytes)
    : device_(device), bytes_(bytes), context_(SharedBackend(device)) {
  data_ = static_cast<char*>(context_->allocator().Allocate(bytes));
}

Storage::Storage(Device device, size_t bytes, void* data, std::function<void()> release)
    : device_(device),
      bytes_(bytes),
      context_(SharedBackend(device)),
      data_(static_cast<char*>(data)),
      release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    // Wrapped memory goes back to its owner at once: wait for the lanes.
    for (const Lane& lane : other_lanes_) {
      try {
        context_->Synchronize(lane);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tandem: waiting for %s before releasing memory: %s\n",
                     lane.Describe().c_str(), e.what());
      }
    }
    release_();
    return;
  }
  if (other_lanes_.empty()) {
    context_->allocator().Free(data_, bytes_);
    return;
  }
  std::vector<std::unique_ptr<LaneEvent>> after;
  try {
    for (const Lane& lane : other_lanes_) {
      after.push_back(context_->NewEvent(/*timing=*/false));
      context_->Record(*after.back(), lane);
    }
  } catch (const std::exception& e) {
    // No event to order the reuse after: the memory is not reused.
    std::fprintf(stderr,
                 "tandem: cannot mark where other lanes are done with %zu bytes "
                 "on %s (%s); leaking them\n",
                 bytes_, device_.ToString().c_str(), e.what());
    return;
  }
  context_->allocator().FreeAfter(data_, bytes_, std::move(after));
}

void Storage::RecordLane(const Lane& lane) {
  TANDEM_CHECK(lane.valid()) << "RecordLane: no lane";
  TANDEM_CHECK(lane.device() == device_)
      << "RecordLane: " << lane.Describe() << " is not a lane of the tensor's device "
      << device_.ToString();
  if (SameQueue(lane, context_->main_lane())) return;
  for (const Lane& known : other_lanes_) {
    if (SameQueue(known, lane)) return;
  }
  other_lanes_.push_back(lane);
}

// Note [Tensor versions]
// A storage's version counts the writes ops queue on it: each op takes its
// outputs' pointers through Tensor::mutable_ptr() or mutable_data(), which
// add one, on the host, when the op is queued (not when a device runs it),
// so the count follows program order on every device at the cost of one
// relaxed atomic increment per output. Views share the storage and so its
// count: writing any view of a storage changes the version of all. A fresh
// tensor starts at 0 whatever Full or FromVector wrote into it. Layers
// record a tensor's version when they keep it for Backward and check it
// there (layers/saved_tensor.h), as PyTorch's saved-variable version
// counters do. Writes through raw pointers (data(), raw_data(), a
// backend's own copies) are not counted.

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {}

void Tensor::RecordLane(const Lane& lane) const {
  if (storage_ != nullptr) storage_->RecordLane(lane);
}

Tensor Tensor::Empty(const Shape& shape, Device device, DType dtype) {
  CheckShape(shape);
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * SizeOf(dtype);
  return Tensor(std::make_shared<Storage>(device, bytes), 0, shape, dtype);
}

Tensor Tensor::Wrap(void* data, const Shape& shape, Device device,
                    std::function<void()> release, DType dtype) {
  CheckShape(shape);
  TANDEM_CHECK(release) << "Tensor::Wrap of " << ShapeToString(shape)
                        << " on " << device << " needs a release callback";
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * SizeOf(dtype);
  return Tensor(std::make_shared<Storage>(device, bytes, data, std::move(release)), 0,
                shape, dtype);
}

Tensor Tensor::Zeros(const Shape& shape, Device device, DType dtype) {
  return Full(shape, 0.f, device, dtype);
}

Tensor Tensor::Full(const Shape& shape, float value, Device device, DType dtype) {
  Tensor t = Empty(shape, device, dtype);
  if (t.numel() > 0) dispatch::Fill(t.backend().main_lane(), value, t.ptr(), t.numel());
  return t;
}

Tensor Tensor::FromVector(const std::vector<float>& values, const Shape& shape,
                          Device device, DType dtype) {
  Tensor t = Empty(shape, device, dtype);
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == t.numel())
      << "FromVector got " << values.size() << " values for shape "
      << ShapeToString(shape) << " (" << t.numel() << " elements)";
  if (t.numel() == 0) return t;
  Backend& backend = t.backend();
  if (dtype == DType::kFloat32) {
    backend.CopyHostToDevice(backend.main_lane(), values.data(), t.raw_data(), t.bytes());
    return t;
  }
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = FloatToBFloat16Bits(values[i]);
  backend.CopyHostToDevice(backend.main_lane(), bits.data(), t.raw_data(), t.bytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  TANDEM_CHECK(i >= -r && i < r) << "dimension " << i << " out of range for "
                                 << ShapeToString(shape_);
  return shape_[i < 0 ? i + r : i];
}

Device Tensor::device() const {
  TANDEM_CHECK(defined(), "use of an undefined tensor");
  return storage_->device();
}

Backend& Tensor::backend() const {
  TANDEM_CHECK(defined(), "use of an undefined tensor");
  return storage_->backend();
}

void* Tensor::raw_data() const {
  TANDEM_CHECK(defined(), "use of an undefined tensor");
  return storage_->data() + static_cast<size_t>(offset_) * SizeOf(dtype_);
}

float* Tensor::data() const {
  TANDEM_CHECK(dtype_ == DType::kFloat32)
      << "data() of a " << DTypeName(dtype_) << " tensor " << ShapeToString(shape_)
      << ": it gives float32 elements; use raw_data() (or ops::Cast to float32)";
  return static_cast<float*>(raw_data());
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  TANDEM_CHECK(rank() >= 1) << "Slice of a scalar tensor";
  TANDEM_CHECK(0 <= begin && begin <= end && end <= shape_[0])
      << "Slice [" << begin << ", " << end << ") out of range for "
      << ShapeToString(shape_);
  Shape shape = shape_;
  shape[0] = end - begin;
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  return Tensor(storage_, offset_ + begin * row, shape, dtype_);
}

Tensor Tensor::Reshape(const Shape& shape) const {
  CheckShape(shape);
  TANDEM_CHECK(NumElements(shape) == numel())
      << "cannot reshape " << ShapeToString(shape_) << " to "
      << ShapeToString(shape);
  return Tensor(storage_, offset_, shape, dtype_);
}

Tensor Tensor::Clone() const {
  Tensor copy = Empty(shape_, device(), dtype_);
  copy.CopyFrom(*this);
  return copy;
}

Tensor Tensor::To(Device target) const {
  if (target == device()) return *this;
  Tensor copy = Empty(shape_, target, dtype_);
  copy.CopyFrom(*this);
  return copy;
}

void Tensor::CopyFrom(const Tensor& src) {
  const Tensor& on = device().is_cpu() ? src : *this;
  CopyFrom(src, on.backend().main_lane());
}

void Tensor::CopyFrom(const Tensor& src, const Lane& lane) {
  TANDEM_CHECK(src.numel() == numel())
      << "CopyFrom: source " << ShapeToString(src.shape()) << " and destination "
      << ShapeToString(shape_) << " differ in size";
  TANDEM_CHECK(src.dtype() == dtype_)
      << "CopyFrom: source is " << DTypeName(src.dtype()) << " but destination "
      << DTypeName(dtype_) << " (ops::Cast converts)";
  const size_t bytes = this->bytes();
  if (bytes == 0) return;
  storage_->BumpVersion();  // See Note [Tensor versions].
  const Device from = src.device();
  const Device to = device();
  const Device lane_device = to.is_cpu() ? from : to;
  TANDEM_CHECK(lane.device() == lane_device)
      << "CopyFrom from " << from << " to " << to << " on " << lane.Describe()
      << ": the lane must belong to " << lane_device;
  if (from == to) {
    lane.backend().CopyDeviceToDevice(lane, src.raw_data(), raw_data(), bytes);
  } else if (from.is_cpu()) {
    lane.backend().CopyHostToDevice(lane, src.raw_data(), raw_data(), bytes);
  } else if (to.is_cpu()) {
    lane.backend().CopyDeviceToHost(lane, src.raw_data(), raw_data(), bytes);
  } else {
    // Between two GPUs: through the host, correct if not fast. Pipeline
    // stages use peer copies on lanes instead (Backend::CopyFromPeer).
    std::vector<char> host(bytes);
    Backend& source = src.backend();
    source.CopyDeviceToHost(source.main_lane(), src.raw_data(), host.data(), bytes);
    lane.backend().CopyHostToDevice(lane, host.data(), raw_data(), bytes);
  }
}

std::vector<float> Tensor::ToVector() const {
  std::vector<float> host(numel());
  if (host.empty()) return host;
  Backend& b = backend();
  if (dtype_ == DType::kFloat32) {
    b.CopyDeviceToHost(b.main_lane(), raw_data(), host.data(), bytes());
    return host;
  }
  std::vector<uint16_t> bits(host.size());
  b.CopyDeviceToHost(b.main_lane(), raw_data(), bits.data(), bytes());
  for (size_t i = 0; i < bits.size(); ++i) host[i] = BFloat16BitsToFloat(bits[i]);
  return host;
}

float Tensor::Item() const {
  TANDEM_CHECK(numel() == 1) << "Item() of a tensor of shape "
                             << ShapeToString(shape_);
  return ToVector()[0];
}

}  // namespace tandem
