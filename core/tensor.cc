#include "core/tensor.h"

#include <cstdint>
#include <sstream>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/check.h"

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

Storage::Storage(Device device, int64_t num_elements)
    : device_(device),
      num_elements_(num_elements),
      context_(SharedBackend(device)) {
  data_ = static_cast<float*>(context_->allocator().Allocate(
      static_cast<size_t>(num_elements) * sizeof(float)));
}

Storage::Storage(Device device, int64_t num_elements, float* data,
                 std::function<void()> release)
    : device_(device),
      num_elements_(num_elements),
      context_(SharedBackend(device)),
      data_(data),
      release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_();
    return;
  }
  context_->allocator().Free(
      data_, static_cast<size_t>(num_elements_) * sizeof(float));
}

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)) {}

Tensor Tensor::Empty(const Shape& shape, Device device) {
  CheckShape(shape);
  return Tensor(std::make_shared<Storage>(device, NumElements(shape)), 0,
                shape);
}

Tensor Tensor::Wrap(float* data, const Shape& shape, Device device,
                    std::function<void()> release) {
  CheckShape(shape);
  TANDEM_CHECK(release) << "Tensor::Wrap of " << ShapeToString(shape)
                        << " on " << device << " needs a release callback";
  return Tensor(std::make_shared<Storage>(device, NumElements(shape), data,
                                          std::move(release)),
                0, shape);
}

Tensor Tensor::Zeros(const Shape& shape, Device device) {
  return Full(shape, 0.f, device);
}

Tensor Tensor::Full(const Shape& shape, float value, Device device) {
  Tensor t = Empty(shape, device);
  Backend& backend = t.backend();
  if (t.numel() > 0) backend.Fill(backend.main_lane(), value, t.data(), t.numel());
  return t;
}

Tensor Tensor::FromVector(const std::vector<float>& values, const Shape& shape,
                          Device device) {
  Tensor t = Empty(shape, device);
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == t.numel())
      << "FromVector got " << values.size() << " values for shape "
      << ShapeToString(shape) << " (" << t.numel() << " elements)";
  Backend& backend = t.backend();
  if (t.numel() > 0) {
    backend.CopyHostToDevice(backend.main_lane(), values.data(), t.data(),
                             t.numel() * sizeof(float));
  }
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

float* Tensor::data() const {
  TANDEM_CHECK(defined(), "use of an undefined tensor");
  return storage_->data() + offset_;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  TANDEM_CHECK(rank() >= 1) << "Slice of a scalar tensor";
  TANDEM_CHECK(0 <= begin && begin <= end && end <= shape_[0])
      << "Slice [" << begin << ", " << end << ") out of range for "
      << ShapeToString(shape_);
  Shape shape = shape_;
  shape[0] = end - begin;
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  return Tensor(storage_, offset_ + begin * row, shape);
}

Tensor Tensor::Reshape(const Shape& shape) const {
  CheckShape(shape);
  TANDEM_CHECK(NumElements(shape) == numel())
      << "cannot reshape " << ShapeToString(shape_) << " to "
      << ShapeToString(shape);
  return Tensor(storage_, offset_, shape);
}

Tensor Tensor::Clone() const {
  Tensor copy = Empty(shape_, device());
  copy.CopyFrom(*this);
  return copy;
}

Tensor Tensor::To(Device target) const {
  if (target == device()) return *this;
  Tensor copy = Empty(shape_, target);
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
  const size_t bytes = static_cast<size_t>(numel()) * sizeof(float);
  if (bytes == 0) return;
  const Device from = src.device();
  const Device to = device();
  const Device lane_device = to.is_cpu() ? from : to;
  TANDEM_CHECK(lane.device() == lane_device)
      << "CopyFrom from " << from << " to " << to << " on " << lane.Describe()
      << ": the lane must belong to " << lane_device;
  if (from == to) {
    lane.backend().CopyDeviceToDevice(lane, src.data(), data(), bytes);
  } else if (from.is_cpu()) {
    lane.backend().CopyHostToDevice(lane, src.data(), data(), bytes);
  } else if (to.is_cpu()) {
    lane.backend().CopyDeviceToHost(lane, src.data(), data(), bytes);
  } else {
    // Between two GPUs: through the host, correct if not fast. Pipeline
    // stages use peer copies on lanes instead (Backend::CopyFromPeer).
    std::vector<float> host(numel());
    Backend& source = src.backend();
    source.CopyDeviceToHost(source.main_lane(), src.data(), host.data(), bytes);
    lane.backend().CopyHostToDevice(lane, host.data(), data(), bytes);
  }
}

std::vector<float> Tensor::ToVector() const {
  std::vector<float> host(numel());
  if (host.empty()) return host;
  Backend& b = backend();
  b.CopyDeviceToHost(b.main_lane(), data(), host.data(), host.size() * sizeof(float));
  return host;
}

float Tensor::Item() const {
  TANDEM_CHECK(numel() == 1) << "Item() of a tensor of shape "
                             << ShapeToString(shape_);
  float value = 0.f;
  Backend& b = backend();
  b.CopyDeviceToHost(b.main_lane(), data(), &value, sizeof(float));
  return value;
}

}  // namespace tandem
