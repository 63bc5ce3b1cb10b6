#include "layers/parameter.h"

#include <utility>

#include "core/check.h"
#include "core/ops.h"

namespace tandem {

Parameter::Parameter(Tensor value)
    : value_(std::move(value)), grad_(Tensor::Zeros(value_.shape(), value_.device())) {}

Parameter::Parameter(Tensor value, Tensor grad) : value_(std::move(value)), grad_(std::move(grad)) {
  TANDEM_CHECK(grad_.shape() == value_.shape() && grad_.dtype() == DType::kFloat32)
      << "a parameter of shape " << ShapeToString(value_.shape()) << " cannot take a "
      << ShapeToString(grad_.shape()) << " " << DTypeName(grad_.dtype()) << " gradient";
}

void Parameter::KeepWorkingCopy(DType dtype) {
  working_ = Tensor::Empty({0}, value_.device(), dtype);
}

namespace {

// Copies `current` (or zeros, where it is undefined) into `view` and returns
// the view, after checking that it can hold it.
Tensor Rehome(const Tensor& current, Tensor view, const Shape& shape, const std::string& name,
              const char* what) {
  TANDEM_CHECK(view.shape() == shape && view.dtype() == DType::kFloat32)
      << "parameter '" << name << "': its " << what << " is " << ShapeToString(shape)
      << " float32 but the view to move it into is " << ShapeToString(view.shape()) << " "
      << DTypeName(view.dtype());
  if (current.defined()) {
    TANDEM_CHECK(current.device() == view.device())
        << "parameter '" << name << "': its " << what << " is on " << current.device()
        << " but the view to move it into is on " << view.device();
    view.CopyFrom(current);
  } else {
    ops::Fill(view, 0.f);
  }
  return view;
}

}  // namespace

void Parameter::MoveGradInto(Tensor view, const std::string& name) {
  grad_ = Rehome(grad_, std::move(view), value_.shape(), name, "gradient");
}

void Parameter::MoveValueInto(Tensor view, const std::string& name) {
  value_ = Rehome(value_, std::move(view), value_.shape(), name, "value");
}

void Parameter::MoveWorkingInto(Tensor view, const std::string& name) {
  TANDEM_CHECK(working_.defined())
      << "parameter '" << name << "' keeps no working copy to move into a "
      << DTypeName(view.dtype()) << " view";
  TANDEM_CHECK(view.shape() == value_.shape() && view.dtype() == working_.dtype() &&
               view.device() == value_.device())
      << "parameter '" << name << "': its working copy is " << ShapeToString(value_.shape())
      << " " << DTypeName(working_.dtype()) << " on " << value_.device()
      << " but the view to move it into is " << ShapeToString(view.shape()) << " "
      << DTypeName(view.dtype()) << " on " << view.device();
  ops::Cast(value_, view);
  working_ = std::move(view);
}

void Parameter::MoveTo(Device device) {
  value_ = value_.To(device);
  grad_ = Tensor::Zeros(value_.shape(), device);  // gradients are float32
  if (working_.defined()) working_ = Tensor::Empty({0}, device, working_.dtype());
}

}  // namespace tandem
